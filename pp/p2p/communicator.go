package p2p

import (
	"errors"
	"fmt"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
)

// Communicator is one rank's endpoint of a pipeline: it exchanges tensors
// with the previous and next stages of its pipeline group (the reference's
// P2PCommunicator). It holds no state between calls beyond the group's own
// message order, so it may be copied by pointer freely, but like the group
// its calls must be ordered by the caller (one goroutine at a time).
type Communicator struct {
	g          comm.Group
	cfg        Config
	rank, size int
	next, prev int // group ranks
}

// New returns the communicator of this rank of the pipeline group pp.
//
// It fails when pp is nil, when PipelineDType is not a valid dtype, when the
// pipeline has more than one stage but no PipelineDType, and when
// OverlapP2PComm is set together with BatchP2PComm (the reference's
// assertion, made here up front).
func New(pp comm.Group, cfg Config) (*Communicator, error) {
	if pp == nil {
		return nil, errors.New("p2p: New: nil pipeline group; pass the rank's pipeline-parallel group (mesh's pp group, or the world for a pure pipeline)")
	}
	if !cfg.PipelineDType.Valid() {
		return nil, fmt.Errorf("p2p: New: PipelineDType %v is not a dtype; use config.Float32, BFloat16 or Float16", cfg.PipelineDType)
	}
	p, r := pp.Size(), pp.Rank()
	if p > 1 && cfg.PipelineDType == config.DTypeNone {
		return nil, fmt.Errorf("p2p: New: pipeline_dtype must be set with %d pipeline stages: set PipelineDType (usually to params_dtype: float32, bfloat16 or float16)", p)
	}
	if cfg.OverlapP2PComm && cfg.BatchP2PComm {
		return nil, errors.New("p2p: New: overlap_p2p_comm needs unbatched messages (batched exchanges always wait): set BatchP2PComm false or OverlapP2PComm false")
	}
	return &Communicator{g: pp, cfg: cfg, rank: r, size: p, next: (r + 1) % p, prev: (r - 1 + p) % p}, nil
}

// Group returns the pipeline group.
func (c *Communicator) Group() comm.Group { return c.g }

// Config returns the settings the communicator was built with.
func (c *Communicator) Config() Config { return c.cfg }

// Stage returns this rank's pipeline stage, its rank in the group
// (the reference's current_stage).
func (c *Communicator) Stage() int { return c.rank }

// NumStages returns the number of pipeline stages P, the group's size
// (the reference's total_stages).
func (c *Communicator) NumStages() int { return c.size }

// IsFirstStage reports whether this rank is pipeline stage 0
// (is_pp_first_stage).
func (c *Communicator) IsFirstStage() bool { return c.rank == 0 }

// IsLastStage reports whether this rank is pipeline stage P−1
// (is_pp_last_stage).
func (c *Communicator) IsLastStage() bool { return c.rank == c.size-1 }

// Next returns the group rank of the next stage, (r+1) mod P.
func (c *Communicator) Next() int { return c.next }

// Prev returns the group rank of the previous stage, (r−1) mod P.
func (c *Communicator) Prev() int { return c.prev }

// peer returns the group rank an op of direction d talks to.
func (c *Communicator) peer(d Dir) int {
	if d == SendNext || d == RecvNext {
		return c.next
	}
	return c.prev
}
