package pp

import (
	"fmt"
	"slices"

	"github.com/gotron/gotron/config"
)

// The reference's names of the three schedules, used as Schedule.Name.
const (
	NameNoPipelining = "forward_backward_no_pipelining"
	NameOneFOneB     = "forward_backward_pipelining_without_interleaving"
	NameInterleaved  = "forward_backward_pipelining_with_interleaving"
)

// Schedule is one pipeline rank's part of a forward-backward pass over all
// microbatches: the ordered Actions an executor walks, and the numbers they
// were made from.
type Schedule struct {
	// Name is the reference function the schedule mirrors (NameOneFOneB, …).
	Name string
	// PP is the pipeline size, VPP the number of model chunks per rank (1
	// without interleaving), Microbatches M, GroupSize G the
	// microbatch_group_size_per_vp_stage (P when unset), Rank this rank.
	PP, VPP, Microbatches, GroupSize, Rank int
	// Warmup and Remaining are the rank's warmup and steady-state step
	// counts (GetPPRankMicrobatches; 1F1B uses min(P−r−1, M) and M − W).
	Warmup, Remaining int
	// AllWarmup is set when every step runs in the warmup phase.
	AllWarmup   bool
	ForwardOnly bool
	// SplitBackward says every Backward action computes the input
	// gradient only and a later WeightGrad action of the same microbatch
	// and chunk the parameters' gradients (zero-bubble schedules).
	SplitBackward bool
	// DeferredEmbeddingWgrads is, on the last rank under
	// defer_embedding_wgrad_compute, how many of the last chunk's
	// microbatches, the last ones, have their backward leave the output
	// layer's weight gradients to the EmbeddingWgrad action (0: none).
	DeferredEmbeddingWgrads int
	// Placement says which stage of the model each chunk (rank, Chunk)
	// holds, and so where its activations come from and go to:
	// config.PlacementLoop (the reference's, the zero value) or, for
	// ZB-V, config.PlacementV.
	Placement config.PipelinePlacement
	// Order is the rank's compute order as signed 1-based chunk ids: a
	// forward of chunk c is c+1, a backward −(c+1) (ConvertScheduleTableToOrder's
	// convention; for one chunk +1 and −1).
	Order []int
	// Actions is the rank's ordered list of actions.
	Actions []Action
}

// peer returns the rank and chunk that chunk c of rank r exchanges an op
// of direction d with: the next stage's for send_next and recv_next, the
// previous stage's for send_prev and recv_prev (s.Placement's map); ok
// is false where the stage has no such neighbour.
func (s *Schedule) peer(r, c int, d Dir) (q, w int, ok bool) {
	if d == SendNext || d == RecvNext {
		return s.Placement.Next(s.PP, max(s.VPP, 1), r, c)
	}
	return s.Placement.Prev(s.PP, max(s.VPP, 1), r, c)
}

// firstStage and lastStage report whether chunk c of rank r holds the
// embedding's stage and the loss's.
func (s *Schedule) firstStage(r, c int) bool {
	return s.Placement.FirstStage(s.PP, max(s.VPP, 1), r, c)
}
func (s *Schedule) lastStage(r, c int) bool { return s.Placement.LastStage(s.PP, max(s.VPP, 1), r, c) }

// GradientsApart reports whether the schedule's gradients must travel on
// a communicator of their own (P2P.GradComm): under the V placement
// activations and gradients both go both ways between two ranks, which
// one first-in, first-out queue per pair of ranks cannot tell apart.
func (s *Schedule) GradientsApart() bool { return s.Placement.GradientsApart() }

// Compute returns the schedule's Forward and Backward actions in order.
func (s *Schedule) Compute() []Action {
	var out []Action
	for _, a := range s.Actions {
		if a.Kind == Forward || a.Kind == Backward {
			out = append(out, a)
		}
	}
	return out
}

// Config chooses and parameterises a schedule the way the reference's
// get_forward_backward_func and ModelParallelConfig do.
type Config struct {
	// PP is pipeline_model_parallel_size (≥ 1) and Rank the pipeline rank.
	PP, Rank int
	// VPP is virtual_pipeline_model_parallel_size; 0 means unset (None).
	// Any value ≥ 1 with PP > 1 selects the interleaved schedule.
	VPP int
	// Microbatches is M, the number of microbatches per iteration.
	Microbatches int
	// GroupSize is microbatch_group_size_per_vp_stage; 0 means PP.
	GroupSize   int
	ForwardOnly bool
	// OverlapP2PComm, OverlapP2PCommWarmupFlush, BatchP2PComm and
	// DeallocatePipelineOutputs are ModelParallelConfig's fields of the same
	// names (the last three matter to the interleaved schedule only).
	OverlapP2PComm            bool
	OverlapP2PCommWarmupFlush bool
	BatchP2PComm              bool
	DeallocatePipelineOutputs bool
	// ExchangesShapes says the pipeline's messages carry their shapes
	// first (variable_seq_lengths): ZB-H2, ZB-V and DualPipeV post
	// receives long before their peers send, and the shape exchange blocks
	// such a receive, so they are refused with it. (Shapes the caller
	// knows, a standalone MTP stage's, travel in P2P.InputShapes and
	// OutputShapes instead, with any schedule.)
	ExchangesShapes bool
	// GradSyncFunc and ParamSyncFunc say whether config.grad_sync_func and
	// config.param_sync_func are set (the distributed optimizer with
	// overlapped reduction and gather sets them).
	GradSyncFunc, ParamSyncFunc bool
	// Schedule names a pipeline schedule other than the reference's
	// choice (--pipeline-schedule): "" or ScheduleOneFOneB for it,
	// ScheduleZBH1 for ZeroBubbleH1, ScheduleZBH2 for ZeroBubbleH2,
	// ScheduleZBV for ZeroBubbleV and ScheduleDualPipeV for DualPipeV
	// (both with VPP 2).
	Schedule string
	// DeferEmbeddingWgrad and WgradDeferralLimit are
	// ModelParallelConfig's defer_embedding_wgrad_compute and
	// wgrad_deferral_limit (DeferEmbeddingWgrad).
	DeferEmbeddingWgrad bool
	WgradDeferralLimit  int
}

// CheckSchedule refuses a Schedule that is unknown or cannot run with the
// rest of the config.
func (c Config) CheckSchedule() error {
	if err := c.checkDeferEmbedding(); err != nil {
		return err
	}
	if c.ExchangesShapes && (c.Schedule == ScheduleZBH2 || c.Schedule == ScheduleZBV || c.Schedule == ScheduleDualPipeV) {
		return fmt.Errorf("--pipeline-schedule %s with pipeline messages that carry their shapes (variable_seq_lengths): the schedule posts receives before its peers send, and the shape exchange would block them; not built: drop --variable-seq-lengths, or choose %s, %s or the interleaved schedule", c.Schedule, ScheduleOneFOneB, ScheduleZBH1)
	}
	switch c.Schedule {
	case "", ScheduleOneFOneB:
		return nil
	case ScheduleZBH1, ScheduleZBH2:
		return checkOneChunkSplit(c, c.Schedule)
	case ScheduleZBV:
		return checkV(c, ScheduleZBV)
	case ScheduleDualPipeV:
		return checkDualPipeV(c)
	}
	return fmt.Errorf("--pipeline-schedule %q: choose %s (the reference's 1F1B, or interleaved with virtual stages), %s, %s, %s or %s", c.Schedule, ScheduleOneFOneB, ScheduleZBH1, ScheduleZBH2, ScheduleZBV, ScheduleDualPipeV)
}

// The values of Config.Schedule.
const (
	ScheduleOneFOneB  = "1f1b"
	ScheduleZBH1      = "zb-h1"
	ScheduleZBH2      = "zb-h2"
	ScheduleZBV       = "zb-v"
	ScheduleDualPipeV = "dualpipev"
)

// Interleaved reports whether the config selects the interleaved schedule.
func (c Config) Interleaved() bool { return c.PP > 1 && c.VPP > 0 }

// check reports the errors common to every schedule.
func (c Config) check() error {
	switch {
	case c.PP < 1:
		return fmt.Errorf("pipeline_model_parallel_size = %d: must be ≥ 1 (%s)", c.PP, flagPP)
	case c.Rank < 0 || c.Rank >= c.PP:
		return fmt.Errorf("pipeline rank %d is outside [0, pipeline_model_parallel_size = %d)", c.Rank, c.PP)
	case c.Microbatches < 1:
		return fmt.Errorf("num_microbatches = %d: there must be at least 1 microbatch per iteration (%s)", c.Microbatches, flagMicrobatches)
	case c.VPP < 0:
		return fmt.Errorf("virtual_pipeline_model_parallel_size = %d: must be ≥ 1, or unset (0) for the non-interleaved schedule (%s)", c.VPP, flagVPP)
	case c.VPP > 0 && c.PP == 1:
		return fmt.Errorf("virtual_pipeline_model_parallel_size = %d selects the interleaved schedule, which needs pipeline_model_parallel_size > 1 (here 1): "+
			"raise %s or unset %s", c.VPP, flagPP, flagVPP)
	case c.OverlapP2PComm && c.VPP == 0 && c.PP > 1:
		return fmt.Errorf("overlap_p2p_comm = true: the non-interleaved pipeline schedule does not support overlapping p2p communication "+
			"(pipeline_model_parallel_size = %d, virtual_pipeline_model_parallel_size unset): set %s, or turn --overlap-p2p-communication off", c.PP, flagVPP)
	}
	return nil
}

// Build returns rank Rank's schedule for cfg, chosen as the reference's
// get_forward_backward_func chooses (schedules.py): PP = 1 runs
// NoPipelining, PP > 1 with VPP set (≥ 1) runs WithInterleaving, else
// WithoutInterleaving. Invalid settings are refused before anything is
// built, each error naming the settings and the fix.
func Build(cfg Config) (*Schedule, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := cfg.CheckSchedule(); err != nil {
		return nil, err
	}
	s, err := build(cfg)
	if err != nil || !cfg.DeferEmbeddingWgrad || cfg.ForwardOnly || cfg.Rank != cfg.PP-1 {
		return s, err
	}
	return DeferEmbeddingWgrad(s, cfg.WgradDeferralLimit), nil
}

// build is Build before defer_embedding_wgrad_compute.
func build(cfg Config) (*Schedule, error) {
	switch {
	case cfg.Schedule == ScheduleZBV: // its placement, forward-only too
		return ZeroBubbleV(cfg.PP, cfg.Rank, cfg.Microbatches, cfg.ForwardOnly, cfg.GradSyncFunc), nil
	case cfg.Schedule == ScheduleDualPipeV:
		return DualPipeV(cfg.PP, cfg.Rank, cfg.Microbatches, cfg.ForwardOnly, cfg.GradSyncFunc), nil
	case cfg.ForwardOnly:
	case cfg.Schedule == ScheduleZBH1:
		return ZeroBubbleH1(cfg.PP, cfg.Rank, cfg.Microbatches, cfg.GradSyncFunc), nil
	case cfg.Schedule == ScheduleZBH2:
		return ZeroBubbleH2(cfg.PP, cfg.Rank, cfg.Microbatches, cfg.GradSyncFunc), nil
	}
	switch {
	case cfg.PP == 1:
		return NoPipelining(cfg.Microbatches, cfg.ForwardOnly), nil
	case cfg.Interleaved():
		return WithInterleaving(cfg.interleaved())
	}
	return WithoutInterleaving(cfg.PP, cfg.Rank, cfg.Microbatches, cfg.ForwardOnly, cfg.GradSyncFunc), nil
}

// BuildAll returns the schedules of every pipeline rank (cfg.Rank is
// ignored), ready for Verify and FormatGrid.
func BuildAll(cfg Config) ([]*Schedule, error) {
	out := make([]*Schedule, max(cfg.PP, 0))
	for r := range out {
		c := cfg
		c.Rank = r
		s, err := Build(c)
		if err != nil {
			return nil, err
		}
		out[r] = s
	}
	if len(out) == 0 {
		return nil, cfg.check()
	}
	return out, nil
}

func (c Config) interleaved() InterleavedConfig {
	return InterleavedConfig{
		PP: c.PP, Rank: c.Rank, Microbatches: c.Microbatches, Chunks: c.VPP, GroupSize: c.GroupSize,
		ForwardOnly: c.ForwardOnly, OverlapP2PComm: c.OverlapP2PComm, OverlapP2PCommWarmupFlush: c.OverlapP2PCommWarmupFlush,
		BatchP2PComm: c.BatchP2PComm, DeallocatePipelineOutputs: c.DeallocatePipelineOutputs,
		GradSyncFunc: c.GradSyncFunc, ParamSyncFunc: c.ParamSyncFunc,
	}
}

// NoPipelining returns the schedule of forward_backward_no_pipelining
// (schedules.py) for M = m microbatches: microbatches 0…M−2 run forward and
// backward inside no_sync (DisableGradSync … EnableGradSync), so their
// gradients only accumulate, and the last one runs outside it, so its
// backward launches the data-parallel reduction. Forward-only omits the
// backwards. It panics if m < 1 (Build checks).
func NoPipelining(m int, forwardOnly bool) *Schedule {
	if m < 1 {
		panic(fmt.Sprintf("pp.NoPipelining: %d microbatches", m))
	}
	e := newEmitter(&Schedule{Name: NameNoPipelining, PP: 1, VPP: 1, Microbatches: m, GroupSize: 1,
		Remaining: m, ForwardOnly: forwardOnly})
	e.disableGradSync()
	for i := 0; i < m-1; i++ {
		e.forward(i, 0)
		if !forwardOnly {
			e.backward(i, 0)
		}
	}
	e.enableGradSync()
	e.forward(m-1, 0)
	if !forwardOnly {
		e.backward(m-1, 0)
	}
	return e.done()
}

// emitter appends actions to a schedule and keeps the no_sync state the
// reference keeps in no_sync_context, so that DisableGradSync and
// EnableGradSync appear only where no_sync is entered and left.
type emitter struct {
	s      *Schedule
	noSync bool
}

func newEmitter(s *Schedule) *emitter { return &emitter{s: s} }

func (e *emitter) add(a Action) { e.s.Actions = append(e.s.Actions, a) }

func (e *emitter) forward(m, c int)  { e.add(Action{Kind: Forward, Microbatch: m, Chunk: c}) }
func (e *emitter) backward(m, c int) { e.add(Action{Kind: Backward, Microbatch: m, Chunk: c}) }
func (e *emitter) wait(o Op)         { e.add(Action{Kind: Wait, Op: o}) }
func (e *emitter) gradSync(c int)    { e.add(Action{Kind: GradSync, Chunk: c}) }
func (e *emitter) paramSync(c int)   { e.add(Action{Kind: ParamSync, Chunk: c}) }

// disableGradSync enters no_sync unless it is entered already.
func (e *emitter) disableGradSync() {
	if !e.noSync {
		e.noSync = true
		e.add(Action{Kind: DisableGradSync})
	}
}

// enableGradSync leaves no_sync if it is entered.
func (e *emitter) enableGradSync() {
	if e.noSync {
		e.noSync = false
		e.add(Action{Kind: EnableGradSync})
	}
}

// comm appends a Comm action for the P2PCommunicator method call with the
// given ops (nil entries are ops the call does not issue), sorted into the
// reference's batch order send_prev, recv_prev, send_next, recv_next. A
// call with no ops is a no-op in the reference and is not appended. It
// returns the ops issued.
func (e *emitter) comm(call string, async bool, ops ...*Op) []Op {
	var list []Op
	for _, o := range ops {
		if o != nil {
			list = append(list, *o)
		}
	}
	if len(list) == 0 {
		return nil
	}
	slices.SortStableFunc(list, func(a, b Op) int { return int(a.Dir) - int(b.Dir) })
	e.add(Action{Kind: Comm, Call: call, Async: async, Ops: list})
	return list
}

// done fills the schedule's Order from its compute actions and returns it.
func (e *emitter) done() *Schedule {
	s := e.s
	s.Order = s.Order[:0]
	for _, a := range s.Actions {
		switch a.Kind {
		case Forward:
			s.Order = append(s.Order, a.Chunk+1)
		case Backward:
			s.Order = append(s.Order, -(a.Chunk + 1))
		}
	}
	return s
}

// op returns a pointer to an op, for emitter.comm; when is false it returns
// nil (the op is not issued).
func op(when bool, d Dir, m, c int) *Op {
	if !when {
		return nil
	}
	return &Op{Dir: d, Microbatch: m, Chunk: c}
}
