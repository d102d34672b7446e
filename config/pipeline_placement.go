package config

import "fmt"

// PipelinePlacement says which stage of the model each model chunk holds:
// with P pipeline ranks and V chunks per rank the model is cut into P·V
// stages, run in order by every microbatch's forward (stage 0 holds the
// embedding, stage P·V−1 the loss) and in reverse by its backward, and
// the placement maps chunk v of pipeline rank p to one of them. It is the
// one owner of that map: the pipeline schedules, their verifier and
// simulator, and the executor's routing of activations and gradients all
// read it.
type PipelinePlacement uint8

const (
	// PlacementLoop is Megatron's placement: chunk (p, v) holds stage
	// v·P + p, so a microbatch loops over the ranks V times (the
	// interleaved schedule; with V = 1, plain pipelining). Every stage's
	// next stage is on the next rank, the last rank's on rank 0.
	PlacementLoop PipelinePlacement = iota
	// PlacementV is the zero-bubble V placement (Qi et al., "Zero Bubble
	// Pipeline Parallelism", ICLR 2024, arXiv 2401.10241, §6; DeepSeek-V3's
	// DualPipeV): two chunks per rank, chunk (p, 0) holding stage p and
	// chunk (p, 1) stage 2P−1−p. A microbatch goes down the ranks on
	// chunk 0 and back up on chunk 1, so rank 0 holds both the first stage
	// (the embedding) and the last (the loss), and the last rank hands its
	// chunk 0's output to its own chunk 1 without a message.
	PlacementV
)

// String names the placement ("loop", "v").
func (pl PipelinePlacement) String() string {
	switch pl {
	case PlacementLoop:
		return "loop"
	case PlacementV:
		return "v"
	}
	return fmt.Sprintf("PipelinePlacement(%d)", int(pl))
}

// Check refuses a placement that cannot hold V chunks per rank: the V
// placement has exactly two.
func (pl PipelinePlacement) Check(chunks int) error {
	switch {
	case pl == PlacementLoop:
		return nil
	case pl == PlacementV && chunks != 2:
		return fmt.Errorf("the V placement holds two model chunks per pipeline rank (one going down the pipeline, one coming back), not %d", chunks)
	case pl == PlacementV:
		return nil
	}
	return fmt.Errorf("unknown pipeline placement %v", pl)
}

// Stage returns the stage chunk (p, v) holds, of P ranks with V chunks
// each (0 ≤ p < P, 0 ≤ v < V).
func (pl PipelinePlacement) Stage(P, V, p, v int) int {
	if pl == PlacementV && v == 1 {
		return 2*P - 1 - p
	}
	return v*P + p
}

// Chunk returns the rank p and chunk v holding stage s (0 ≤ s < P·V): the
// inverse of Stage.
func (pl PipelinePlacement) Chunk(P, V, s int) (p, v int) {
	if pl == PlacementV && s >= P {
		return 2*P - 1 - s, 1
	}
	return s % P, s / P
}

// Next returns the rank and chunk of the stage after chunk (p, v)'s, the
// one its output activations go to; ok is false on the last stage.
func (pl PipelinePlacement) Next(P, V, p, v int) (q, w int, ok bool) {
	s := pl.Stage(P, V, p, v)
	if s == P*V-1 {
		return 0, 0, false
	}
	q, w = pl.Chunk(P, V, s+1)
	return q, w, true
}

// Prev returns the rank and chunk of the stage before chunk (p, v)'s, the
// one its input gradients go to; ok is false on the first stage.
func (pl PipelinePlacement) Prev(P, V, p, v int) (q, w int, ok bool) {
	s := pl.Stage(P, V, p, v)
	if s == 0 {
		return 0, 0, false
	}
	q, w = pl.Chunk(P, V, s-1)
	return q, w, true
}

// FirstStage reports whether chunk (p, v) holds stage 0, the embedding's.
func (pl PipelinePlacement) FirstStage(P, V, p, v int) bool { return pl.Stage(P, V, p, v) == 0 }

// LastStage reports whether chunk (p, v) holds the last stage, the
// loss's.
func (pl PipelinePlacement) LastStage(P, V, p, v int) bool {
	return pl.Stage(P, V, p, v) == P*V-1
}

// TowardNextRank reports whether chunk v's stages follow the ranks up:
// its next stage is on the next pipeline rank (rank 0 after the last,
// under the loop placement) and its previous stage on the previous one.
// The V placement's chunk 1 runs the other way, from the last rank back
// to rank 0.
func (pl PipelinePlacement) TowardNextRank(v int) bool { return !(pl == PlacementV && v == 1) }

// Ends returns the pipeline ranks holding the first and the last stage
// of a pipeline of P ranks: 0 and P−1 under the loop (whatever the number
// of chunks), 0 and 0 under the V. They are the word-embedding group's.
func (pl PipelinePlacement) Ends(P int) (first, last int) {
	if pl == PlacementV {
		return 0, 0
	}
	return 0, P - 1
}

// GradientsApart reports whether activations and gradients travel both
// ways between two ranks under the placement (the V: chunk 0's
// activations go to the next rank, chunk 1's gradients too), so that a
// communicator matching messages only by the pair of ranks must carry
// the gradients on a group of their own.
func (pl PipelinePlacement) GradientsApart() bool { return pl == PlacementV }
