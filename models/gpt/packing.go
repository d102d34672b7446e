package gpt

import (
	"fmt"
	"sync/atomic"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor/kernels"
)

// Inputs are a micro-batch's inputs to ForwardInputs: the arguments of
// Forward plus what packed sequences (several documents in a row) need,
// as data.Batch carries them.
type Inputs struct {
	// IDs are the token ids [Rows, Seq], row-major (read by a chunk with
	// the embedding); Labels the targets [Rows, Seq] (read by a chunk with
	// the head; nil: return the logits). See Forward.
	IDs, Labels []int32
	// Rows and Seq are the micro-batch's b and s: under context
	// parallelism s is the rank's s_full/cp tokens of every row.
	Rows, Seq int
	// PositionIDs, when not nil, are each token's position [Rows, Seq]
	// (--reset-position-ids; under context parallelism the rank's
	// cp.Split part, as IDs): the rows of the learned position embedding
	// (position_embeddings[position_ids], its gradient scattered to those
	// rows) or the angles of RoPE (every layer: every pipeline stage of a
	// RoPE model reads them). Each must lie in [0, max_position_embeddings).
	// Nil means each token's position in the whole sequence, 0..s_full−1.
	PositionIDs []int32
	// Samples, under Randomness.Counter, are each row's sample index in
	// the data: the samples consumed before the global batch plus the
	// row's place in it, the same whatever the layout deals the rows to
	// (its counter-based dropout's key).
	Samples []int64
	// Segments, when not nil, number the documents of every row over the
	// whole sequence, [Rows, Seq·cp] row-major: under context parallelism
	// the rows before cp.Split, the same on every rank of the group
	// (--reset-attention-mask; data.Batch.Segments). A token attends to an
	// earlier one only when both have the same segment id. Every pipeline
	// stage reads them (every layer's attention). Nil means causal
	// attention over whole rows.
	Segments []int32
	// MoEAuxLossScale is the backward scale of the MoE layers'
	// load-balancing and z losses in this forward: the main loss's (the
	// loss scale × cp / microbatches, as the schedule sets Megatron's
	// MoEAuxLossAutoScaler); 0 means 1.
	MoEAuxLossScale float32
	// PreHook, when set, runs before each part of this forward pass — the
	// embedding, every decoder layer (or checkpointed run of layers), the
	// head — with the parameters that part uses: the place of the
	// data-parallel wrapper's forward pre-hook, which waits for the
	// parameters' all-gather under overlap_param_gather. Its error ends the
	// forward pass.
	PreHook func(ps []*nn.Parameter) error
	// PostHook, when set, runs after each of those parts with the same
	// parameters and the part's output y, and the pass goes on with what
	// it returns: the place of Megatron-FSDP's forward post-hook, which
	// releases a unit's gathered parameters and puts behind y the
	// autograd function that gathers them again for the part's backward.
	PostHook func(ps []*nn.Parameter, y *autograd.Var) *autograd.Var
	// CPWait, when set, accumulates the nanoseconds this pass's ring
	// attention (context parallelism) spends blocked on receives.
	CPWait *atomic.Int64
	// Stats, when set, receives the activation memory at the boundaries
	// of this forward pass if the tape records.
	Stats *ActivationStats
	// MTP, when set on a chunk holding the multi-token-prediction depths,
	// gives each depth's inputs (MTPBatch, cp.Split like IDs), and the
	// chunk returns the depths' per-token losses after the main ones. Nil:
	// the depths do not run (evaluation; the reference computes and drops
	// them there).
	MTP []MTPInputs
}

// checkPacking checks the shapes of in's position ids and segments and
// that every position id has a row of the position table.
func (m *Model) checkPacking(in Inputs) error {
	b, s := in.Rows, in.Seq
	if in.PositionIDs != nil {
		if len(in.PositionIDs) != b*s {
			return fmt.Errorf("gpt: %d position ids for a [%d, %d] micro-batch", len(in.PositionIDs), b, s)
		}
		maxPos := m.Config.MaxPositions()
		for i, p := range in.PositionIDs {
			if p < 0 || int(p) >= maxPos {
				at := i % s // under CP, the token's place in the whole row
				if n := m.CP.Size(); n > 1 {
					at = cp.Positions(s*n, n, m.CP.Rank())[at]
				}
				return fmt.Errorf("gpt: position id %d at row %d, position %d is outside [0, max_position_embeddings = %d): check the data's position ids or raise --max-position-embeddings", p, i/s, at, maxPos)
			}
		}
	}
	if full := s * m.CP.Size(); in.Segments != nil && len(in.Segments) != b*full {
		return fmt.Errorf("gpt: %d segment ids for a micro-batch of %d rows of %d positions (segments cover the whole sequence, before the context-parallel split)", len(in.Segments), b, full)
	}
	return nil
}

// rotaryOf returns the RoPE table of a pass over s local tokens of b rows
// and, for per-token positions [b, s], each token's row of it
// (sequence-first); nil and nil without RoPE. Without positions it is
// rotary's table of sequence indices. With them it is the table of
// positions 0..n−1, n = max(seq_length, the largest position id + 1),
// kept and rebuilt only for a larger position: a position's cosines and
// sines do not depend on the table holding them.
func (m *Model) rotaryOf(s, b int, positions []int32) (*kernels.RotaryTable, []int32, error) {
	spec, ok := m.Config.Rotary()
	if positions == nil || !ok {
		t, err := m.rotary(s)
		return t, nil, err
	}
	c := m.Config
	n := c.SeqLength
	for _, p := range positions {
		n = max(n, int(p)+1)
	}
	m.ropeMu.Lock()
	defer m.ropeMu.Unlock()
	if m.ropeIDs == nil || len(m.ropeIDs.Cos) < n*(m.ropeIDs.Rot/2) {
		pos := make([]int, n)
		for i := range pos {
			pos[i] = i
		}
		t, err := rotaryTable(pos, spec)
		if err != nil {
			return nil, nil, err
		}
		m.ropeIDs = t
	}
	return m.ropeIDs, SequenceFirst(positions, b, s), nil
}
