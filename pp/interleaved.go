package pp

import "fmt"

// InterleavedConfig parameterises WithInterleaving: pipeline size PP, this
// Rank, M = Microbatches, V = Chunks model chunks per rank, G = GroupSize
// (microbatch_group_size_per_vp_stage; 0 means PP), and the
// ModelParallelConfig switches the schedule reads.
type InterleavedConfig struct {
	PP, Rank, Microbatches, Chunks, GroupSize int
	ForwardOnly                               bool
	// OverlapP2PComm issues the steady-state exchanges asynchronously and
	// waits for them just before the data is needed.
	OverlapP2PComm bool
	// OverlapP2PCommWarmupFlush also overlaps the warmup and cooldown
	// exchanges (needs OverlapP2PComm, not BatchP2PComm).
	OverlapP2PCommWarmupFlush bool
	// BatchP2PComm cannot be combined with OverlapP2PComm.
	BatchP2PComm bool
	// DeallocatePipelineOutputs waits for each activation send right after
	// issuing it, so that the output buffer can be released.
	DeallocatePipelineOutputs bool
	// GradSyncFunc and ParamSyncFunc say whether config.grad_sync_func and
	// config.param_sync_func are set.
	GradSyncFunc, ParamSyncFunc bool
}

func (c InterleavedConfig) groupSize() int {
	if c.GroupSize == 0 {
		return c.PP
	}
	return c.GroupSize
}

// Validate returns the first violated rule of the interleaved schedule, or
// nil: PP ≥ 2, 0 ≤ Rank < PP, Chunks ≥ 1, overlap_p2p_comm without
// batch_p2p_comm, the warmup-flush prerequisites, and ValidateInterleaved.
func (c InterleavedConfig) Validate() error {
	switch {
	case c.PP < 2:
		return fmt.Errorf("the interleaved schedule needs pipeline_model_parallel_size ≥ 2 (here %d): raise %s or unset %s", c.PP, flagPP, flagVPP)
	case c.Rank < 0 || c.Rank >= c.PP:
		return fmt.Errorf("pipeline rank %d is outside [0, pipeline_model_parallel_size = %d)", c.Rank, c.PP)
	case c.Chunks < 1:
		return fmt.Errorf("virtual_pipeline_model_parallel_size = %d: the interleaved schedule needs ≥ 1 model chunk per rank (%s)", c.Chunks, flagVPP)
	case c.OverlapP2PComm && c.BatchP2PComm:
		return fmt.Errorf("overlap_p2p_comm and batch_p2p_comm are both set, but overlapped pipeline communication cannot be batched: turn batch_p2p_comm off")
	case c.OverlapP2PCommWarmupFlush && (!c.OverlapP2PComm || c.BatchP2PComm):
		return fmt.Errorf("overlap_p2p_comm_warmup_flush needs overlap_p2p_comm = true and batch_p2p_comm = false (here %v and %v): "+
			"turn --overlap-p2p-communication on and batching off, or the warmup flush off", c.OverlapP2PComm, c.BatchP2PComm)
	case c.OverlapP2PCommWarmupFlush && c.Chunks == 1:
		// The last rank's warmup is empty (W = 2·(P−r−1) = 0), so its first
		// steady forward finds no prefetched receive to wait for: the
		// reference fails its "should have registered recv handle" assert.
		return fmt.Errorf("overlap_p2p_comm_warmup_flush with virtual_pipeline_model_parallel_size = 1: the last pipeline rank has no warmup step "+
			"to prefetch its first input, so the schedule cannot run: use %s ≥ 2, or turn the warmup flush off", flagVPP)
	}
	return ValidateInterleaved(c.PP, c.Microbatches, c.groupSize())
}

// WithInterleaving returns the rank's schedule of the interleaved 1F1B
// pipeline (schedules.py forward_backward_pipelining_with_interleaving,
// arXiv 2104.04473 §2.2, bubble (P−1)/(V·M)). The virtual microbatch k
// runs the forward of GetScheduleTable's entry k and the backward of that
// entry with the chunk mirrored (V−1−chunk). With W from
// GetPPRankMicrobatches (W = 2·(P−r−1) + (V−1)·G, clamped to M·V):
//
//	warmup    k < W:      F(k), send_forward_recv_forward (the last warmup
//	                      step also pre-receives the first output gradient)
//	steady    k < M·V−W:  F(k+W), B(k), send_forward_backward_recv_forward_backward
//	cooldown  k ≥ M·V−W:  B(k), send_backward_recv_backward
//
// Receives follow recv_tensor_from_previous_stage: the first rank (last,
// for gradients) receives nothing for its first P−1 steps and then the
// tensor of the chunk the last rank finished P−1 steps before, plus one;
// the other ranks receive for the chunk of step k+1. OverlapP2PComm
// splits each exchange into an Async forward and backward Comm with Wait
// actions where the reference waits on its handles. Grad sync: no_sync is
// left for the backward of each chunk's last microbatch (or, with
// GradSyncFunc, GradSync of chunk(k−r) once k−r is its last microbatch) and
// entered again after every backward; ParamSync of chunks 0 and 1 comes
// first and of chunk c+1 when k+r is chunk c's first microbatch.
func WithInterleaving(cfg InterleavedConfig) (*Schedule, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := newInterleavedGen(cfg)
	if err := g.run(); err != nil {
		return nil, err
	}
	return g.e.done(), nil
}

// interleavedGen holds what the reference's closure keeps between steps:
// the no_sync state, the set of chunks whose grads were synchronised, the
// per-chunk count of received tensors (which names the microbatch of the
// next one) and the queues of outstanding async handles.
type interleavedGen struct {
	cfg                     InterleavedConfig
	e                       *emitter
	p, r, m, v, gs, total   int
	w, rem                  int
	allWarmup, first, last  bool
	table                   []TableEntry
	fwdRecvs, bwdRecvs      []int
	synced                  []bool
	recvPrevWaits           []Op
	recvNextWaits           []Op
	sendNextWait            *Op
	sendPrevWait            *Op
	overlap, flush, dealloc bool
}

func newInterleavedGen(cfg InterleavedConfig) *interleavedGen {
	g := &interleavedGen{cfg: cfg, p: cfg.PP, r: cfg.Rank, m: cfg.Microbatches, v: cfg.Chunks, gs: cfg.groupSize(),
		overlap: cfg.OverlapP2PComm, flush: cfg.OverlapP2PCommWarmupFlush, dealloc: cfg.DeallocatePipelineOutputs}
	g.total, g.w, g.rem, g.allWarmup = GetPPRankMicrobatches(g.m, g.v, g.gs, g.p, g.r, true, cfg.ForwardOnly)
	g.first, g.last = g.r == 0, g.r == g.p-1
	g.table = GetScheduleTable(g.m, g.v, g.gs)
	g.fwdRecvs, g.bwdRecvs, g.synced = make([]int, g.v), make([]int, g.v), make([]bool, g.v)
	g.e = newEmitter(&Schedule{Name: NameInterleaved, PP: g.p, VPP: g.v, Microbatches: g.m, GroupSize: g.gs, Rank: g.r,
		Warmup: g.w, Remaining: g.rem, AllWarmup: g.allWarmup, ForwardOnly: cfg.ForwardOnly})
	return g
}

// chunk is get_model_chunk_id: the chunk of virtual microbatch k (mod M·V)
// in the forward or the backward direction.
func (g *interleavedGen) chunk(k int, forward bool) int {
	c := g.table[k%g.total].Chunk
	if !forward {
		c = g.v - 1 - c
	}
	return c
}

func (g *interleavedGen) lastMicrobatch(k int) bool {
	return k < g.total && g.table[k].Microbatch == g.m-1
}
func (g *interleavedGen) firstMicrobatch(k int) bool {
	return k < g.total && g.table[k].Microbatch == 0
}

// recvFromPrevStage is recv_tensor_from_previous_stage: whether step k
// receives a tensor (from the previous stage forward, the next stage
// backward) and for which chunk.
func (g *interleavedGen) recvFromPrevStage(k int, forward bool) (bool, int) {
	leading, lastChunk, step := g.first, g.v-1, 1
	if !forward {
		leading, lastChunk, step = g.last, 0, -1
	}
	if !leading {
		return true, g.chunk(k+1, forward)
	}
	recv := true
	var next int
	if k < g.p-1 {
		recv = false
		next = g.chunk(k+1, forward)
	} else {
		next = g.chunk(k-(g.p-1), forward)
	}
	if next == lastChunk {
		recv = false
	}
	return recv, next + step
}

// recvPrevOp and recvNextOp name the next tensor received for chunk c:
// each chunk receives its microbatches in order.
func (g *interleavedGen) recvPrevOp(recv bool, c int) *Op {
	if !recv {
		return nil
	}
	o := op(true, RecvPrev, g.fwdRecvs[c], c)
	g.fwdRecvs[c]++
	return o
}

func (g *interleavedGen) recvNextOp(recv bool, c int) *Op {
	if !recv {
		return nil
	}
	o := op(true, RecvNext, g.bwdRecvs[c], c)
	g.bwdRecvs[c]++
	return o
}

// sendNextOp is the activation of forward step k unless it is the last
// chunk on the last stage; sendPrevOp the input gradient of backward step
// k unless it is the first chunk on the first stage.
func (g *interleavedGen) sendNextOp(k int) *Op {
	c := g.chunk(k, true)
	return op(!(c == g.v-1 && g.last), SendNext, g.table[k].Microbatch, c)
}

func (g *interleavedGen) sendPrevOp(k int) *Op {
	c := g.chunk(k, false)
	return op(!(c == 0 && g.first), SendPrev, g.table[k].Microbatch, c)
}

// forwardStep is forward_step_helper: the param-sync launch of
// forward_step_helper_preprocess, then the forward.
func (g *interleavedGen) forwardStep(k int) {
	if g.cfg.ParamSyncFunc && !g.cfg.ForwardOnly {
		if j := k + g.r; j < g.total && g.firstMicrobatch(j) {
			if c := g.chunk(j, true) + 1; c > 1 && c < g.v {
				g.e.paramSync(c)
			}
		}
	}
	g.e.forward(g.table[k].Microbatch, g.chunk(k, true))
}

// backwardStep is backward_step_helper with its grad-sync pre- and
// postprocessing.
func (g *interleavedGen) backwardStep(k int) {
	c := g.chunk(k, false)
	if !g.cfg.GradSyncFunc && g.lastMicrobatch(k) {
		g.e.enableGradSync()
		g.synced[c] = true
	}
	g.e.backward(g.table[k].Microbatch, c)
	if g.cfg.GradSyncFunc {
		if j := k - g.r; j >= 0 && g.lastMicrobatch(j) {
			sc := g.chunk(j, false)
			g.e.enableGradSync()
			g.e.gradSync(sc)
			g.synced[sc] = true
		}
	}
	g.e.disableGradSync()
}

// popWait waits for the oldest handle of q. With the warmup flush the
// reference asserts there is one; otherwise it waits only if there is.
func (g *interleavedGen) popWait(q *[]Op, what string, k int) error {
	if len(*q) == 0 {
		if g.flush {
			return fmt.Errorf("pp: internal: rank %d step %d: no outstanding %s handle to wait for", g.r, k, what)
		}
		return nil
	}
	g.e.wait((*q)[0])
	*q = (*q)[1:]
	return nil
}

// asyncForward issues an async send_forward_recv_forward and then handles
// its send_next and recv_prev handles as pp_post_forward does.
func (g *interleavedGen) asyncForward(send, recv *Op) {
	ops := g.e.comm("send_forward_recv_forward", true, send, recv)
	if g.sendNextWait != nil {
		g.e.wait(*g.sendNextWait)
	}
	g.sendNextWait = nil
	for _, o := range ops {
		switch o.Dir {
		case SendNext:
			g.sendNextWait = &o
		case RecvPrev:
			g.recvPrevWaits = append(g.recvPrevWaits, o)
		}
	}
	if g.sendNextWait != nil && g.dealloc {
		g.e.wait(*g.sendNextWait)
		g.sendNextWait = nil
	}
}

// asyncBackward is asyncForward's mirror for send_backward_recv_backward.
func (g *interleavedGen) asyncBackward(send, recv *Op) {
	ops := g.e.comm("send_backward_recv_backward", true, send, recv)
	if g.sendPrevWait != nil {
		g.e.wait(*g.sendPrevWait)
	}
	g.sendPrevWait = nil
	for _, o := range ops {
		switch o.Dir {
		case SendPrev:
			g.sendPrevWait = &o
		case RecvNext:
			g.recvNextWaits = append(g.recvNextWaits, o)
		}
	}
}
