package pp

import (
	"fmt"
	"slices"
)

// mc names a microbatch of a chunk on one rank.
type mc struct{ m, c int }

func (x mc) String() string { return fmt.Sprintf("(m%d,c%d)", x.m, x.c) }

// opRef locates an op: rank, action index and op index.
type opRef struct{ rank, step, idx int }

// chanKey is one FIFO: messages from src to dst of activations (send_next
// meets recv_prev) or of gradients (send_prev meets recv_next).
type chanKey struct {
	src, dst int
	grad     bool
}

// fifo holds the posted ops of one channel not yet matched.
type fifo struct{ sends, recvs []opRef }

// asyncState follows an op issued by an async Comm.
type asyncState struct {
	step    int
	matched bool
	waited  bool
}

// rankState is one rank's progress through its list.
type rankState struct {
	s       *Schedule
	pc      int
	posted  bool            // the Comm action at pc has posted its ops
	pending int             // its ops not matched yet
	matched map[[2]int]bool // (step, op index) → met its counterpart
	issued  map[Op]int      // op → step that issued it
	async   map[Op]*asyncState
	inputs  map[mc]bool // received activations not consumed yet
	grads   map[mc]bool // received gradients not consumed yet
	fwd     map[mc]bool
	bwd     map[mc]bool
	bwdN    []int       // backwards run per chunk
	wgt     map[mc]bool // weight gradients run (split schedules)
	wgtN    []int       // and per chunk
	synced  []int       // grad synchronisations per chunk
	params  []int       // param syncs per chunk
	noSync  bool
	live    int
	peak    int
	// embDone and embSynced: the deferred output-layer weight gradients
	// (EmbeddingWgrad) have run, and have been reduced.
	embDone, embSynced bool
}

// simWorld is a run of all ranks' schedules: their states and the
// channels between them.
type simWorld struct {
	ranks   []*rankState
	chans   map[chanKey]*fifo
	p, m, v int
	shared  bool // VerifyOptions.SharedPairFIFO
}

func newSimWorld(schedules []*Schedule) *simWorld {
	w := &simWorld{chans: map[chanKey]*fifo{}, p: len(schedules), m: schedules[0].Microbatches, v: schedules[0].VPP}
	for _, s := range schedules {
		w.ranks = append(w.ranks, &rankState{s: s, matched: map[[2]int]bool{}, issued: map[Op]int{},
			async: map[Op]*asyncState{}, inputs: map[mc]bool{}, grads: map[mc]bool{}, fwd: map[mc]bool{}, bwd: map[mc]bool{}, wgt: map[mc]bool{},
			bwdN: make([]int, w.v), wgtN: make([]int, w.v), synced: make([]int, w.v), params: make([]int, w.v)})
	}
	return w
}

func (w *simWorld) finished() bool {
	for _, rs := range w.ranks {
		if rs.pc < len(rs.s.Actions) {
			return false
		}
	}
	return true
}

func (w *simWorld) opAt(ref opRef) Op { return w.ranks[ref.rank].s.Actions[ref.step].Ops[ref.idx] }

// route returns the channel of an op issued by rank r and the peer rank.
func (w *simWorld) route(r int, o Op) (chanKey, int) { return route(w.ranks[r].s, r, o, w.shared) }

// route returns the channel an op issued by rank r of schedule s uses and
// the peer rank (s.peer's): activations and gradients travel on channels
// of their own, or, with shared, on one first-in, first-out channel per
// direction between two ranks. The verifier and the simulator read it.
func route(s *Schedule, r int, o Op, shared bool) (chanKey, int) {
	q, _, ok := s.peer(r, o.Chunk, o.Dir)
	if !ok { // refused by post; the ring's neighbour keeps the key defined
		q = (r + 1) % s.PP
		if o.Dir == SendPrev || o.Dir == RecvPrev {
			q = (r - 1 + s.PP) % s.PP
		}
	}
	grad := !shared && (o.Dir == SendPrev || o.Dir == RecvNext)
	if o.Dir == SendNext || o.Dir == SendPrev {
		return chanKey{r, q, grad}, q
	}
	return chanKey{q, r, grad}, q
}

// postOrder is the order a Comm action posts its ops in: the action's
// own, or with a shared FIFO per pair pp/p2p's (sends next before prev,
// receives prev before next).
func (w *simWorld) postOrder(ops []Op) []int {
	idx := make([]int, len(ops))
	for j := range idx {
		idx[j] = j
	}
	if w.shared {
		rank := [...]int{SendNext: 0, RecvPrev: 1, SendPrev: 2, RecvNext: 3}
		slices.SortStableFunc(idx, func(a, b int) int { return rank[ops[a].Dir] - rank[ops[b].Dir] })
	}
	return idx
}

// arrival is the name a sent tensor has on the receiving rank: the chunk
// of the next stage for an activation, of the previous for a gradient.
func (w *simWorld) arrival(src int, o Op) mc {
	_, c, _ := w.ranks[src].s.peer(src, o.Chunk, o.Dir)
	return mc{o.Microbatch, c}
}

// advance runs rank rs until it blocks or ends; it reports whether it moved.
func (w *simWorld) advance(rs *rankState) (bool, error) {
	moved := false
	for rs.pc < len(rs.s.Actions) {
		ok, err := w.step(rs)
		if err != nil || !ok {
			return moved, err
		}
		moved = true
	}
	return moved, nil
}

// step tries the action at rs.pc; it reports whether the action completed.
func (w *simWorld) step(rs *rankState) (bool, error) {
	r, i := rs.s.Rank, rs.pc
	a := rs.s.Actions[i]
	fail := func(kind, format string, args ...any) error {
		return &VerifyError{Kind: kind, Rank: r, Step: i, Msg: fmt.Sprintf("rank %d step %d (%v): ", r, i, a) + fmt.Sprintf(format, args...)}
	}
	x := mc{a.Microbatch, a.Chunk}
	inRange := x.m >= 0 && x.m < w.m && x.c >= 0 && x.c < w.v
	switch a.Kind {
	case Forward, Backward:
		if !inRange {
			return false, fail("order", "microbatch or chunk out of range (%d microbatches, %d chunks)", w.m, w.v)
		}
		if kind, err := rs.compute(w, a.Kind, x); err != "" {
			return false, fail(kind, "%s", err)
		}
	case WeightGrad:
		if !inRange {
			return false, fail("order", "microbatch or chunk out of range (%d microbatches, %d chunks)", w.m, w.v)
		}
		if kind, err := rs.weightGrad(w, x); err != "" {
			return false, fail(kind, "%s", err)
		}
	case EmbeddingWgrad:
		if kind, err := rs.embeddingWgrad(w, x.c); err != "" {
			return false, fail(kind, "%s", err)
		}
	case Comm:
		if !rs.posted {
			if w.p == 1 {
				return false, fail("config", "pipeline_model_parallel_size = 1 has no peer to communicate with")
			}
			if len(a.Ops) == 0 {
				return false, fail("config", "a Comm action with no ops")
			}
			for _, j := range w.postOrder(a.Ops) {
				if kind, err := w.post(rs, i, j, a.Ops[j], a.Async); err != nil {
					return false, fail(kind, "%s", err)
				}
			}
			rs.posted, rs.pending = true, 0
			for j := range a.Ops {
				if !rs.matched[[2]int{i, j}] {
					rs.pending++
				}
			}
		}
		if !a.Async && rs.pending > 0 {
			return false, nil
		}
		if !a.Async {
			for _, o := range a.Ops {
				if err := rs.deliver(o); err != "" {
					return false, fail("mismatch", "%s", err)
				}
			}
		}
		rs.posted = false
	case Wait:
		st := rs.async[a.Op]
		switch {
		case st == nil:
			return false, fail("order", "waits for %v, which no earlier async Comm issued", a.Op)
		case st.waited:
			return false, fail("order", "waits for %v a second time", a.Op)
		case !st.matched:
			return false, nil
		}
		st.waited = true
		if err := rs.deliver(a.Op); err != "" {
			return false, fail("mismatch", "%s", err)
		}
	case DisableGradSync, EnableGradSync:
		if (a.Kind == DisableGradSync) == rs.noSync {
			return false, fail("sync", "no_sync is entered and left alternately")
		}
		rs.noSync = a.Kind == DisableGradSync
	case GradSync, ParamSync:
		if x.c < 0 || x.c >= w.v {
			return false, fail("sync", "chunk out of range (%d chunks)", w.v)
		}
		if a.Kind == GradSync {
			if done := rs.gradsDone(x.c); done != w.m && !rs.s.ForwardOnly {
				return false, fail("sync", "grad_sync of chunk %d after %d of its %d backwards: it would reduce partial gradients", x.c, done, w.m)
			}
			if rs.s.DefersEmbedding(w.m-1, x.c) {
				if !rs.embDone {
					return false, fail("sync", "grad_sync of chunk %d before its deferred output-layer weight gradients (emb_wgrad): it would reduce partial gradients", x.c)
				}
				rs.embSynced = true
			}
			rs.synced[x.c]++
		} else {
			if rs.params[x.c]++; rs.params[x.c] > 1 {
				return false, fail("sync", "param_sync of chunk %d a second time", x.c)
			}
			for y := range rs.fwd {
				if y.c == x.c {
					return false, fail("sync", "param_sync of chunk %d after its forward %v", x.c, y)
				}
			}
		}
	}
	rs.pc++
	return true, nil
}

// compute runs Forward or Backward of x; it returns a non-empty reason if
// the action cannot run.
func (rs *rankState) compute(w *simWorld, k Kind, x mc) (kind, reason string) {
	r := rs.s.Rank
	if k == Forward {
		if rs.fwd[x] {
			return "order", "forward of " + x.String() + " a second time"
		}
		if q, c, _ := rs.s.peer(r, x.c, RecvPrev); q == r && !rs.s.firstStage(r, x.c) {
			if !rs.fwd[mc{x.m, c}] { // handed over on this rank, no message
				return "order", fmt.Sprintf("the input %v is chunk %d's output, whose forward has not run", x, c)
			}
		} else if !rs.s.firstStage(r, x.c) {
			if !rs.inputs[x] {
				return "order", "the input " + x.String() + " has not been received" + rs.why(Op{Dir: RecvPrev, Microbatch: x.m, Chunk: x.c})
			}
			delete(rs.inputs, x)
		}
		rs.fwd[x] = true
		if !rs.s.ForwardOnly {
			rs.live++
			rs.peak = max(rs.peak, rs.live)
		}
		return "", ""
	}
	switch {
	case !rs.fwd[x]:
		return "order", "backward of " + x.String() + " before its forward"
	case rs.bwd[x]:
		return "order", "backward of " + x.String() + " a second time"
	}
	if q, c, _ := rs.s.peer(r, x.c, RecvNext); q == r && !rs.s.lastStage(r, x.c) {
		if !rs.bwd[mc{x.m, c}] { // handed over on this rank, no message
			return "order", fmt.Sprintf("the output gradient %v is chunk %d's input gradient, whose backward has not run", x, c)
		}
	} else if !rs.s.lastStage(r, x.c) {
		if !rs.grads[x] {
			return "order", "the output gradient " + x.String() + " has not been received" + rs.why(Op{Dir: RecvNext, Microbatch: x.m, Chunk: x.c})
		}
		delete(rs.grads, x)
	}
	rs.bwd[x] = true
	rs.bwdN[x.c]++
	if rs.s.SplitBackward {
		return "", "" // the gradients are complete, and the activation free, after the WeightGrad
	}
	rs.live--
	if !rs.noSync {
		if rs.bwdN[x.c] != w.m {
			return "sync", fmt.Sprintf("runs outside no_sync but is backward %d of chunk %d's %d: the reduction would launch on partial gradients", rs.bwdN[x.c], x.c, w.m)
		}
		rs.synced[x.c]++
	}
	return "", ""
}

// weightGrad runs the WeightGrad of x: it needs a split schedule and x's
// backward, runs once, frees x's activations, and completes the chunk's
// gradients for this microbatch, so outside no_sync it must be the
// chunk's last.
func (rs *rankState) weightGrad(w *simWorld, x mc) (kind, reason string) {
	switch {
	case !rs.s.SplitBackward:
		return "order", "weight gradients of " + x.String() + " in a schedule whose backward is not split (its Backward computes them)"
	case !rs.bwd[x]:
		return "order", "weight gradients of " + x.String() + " before its backward"
	case rs.wgt[x]:
		return "order", "weight gradients of " + x.String() + " a second time"
	}
	rs.wgt[x] = true
	rs.wgtN[x.c]++
	rs.live--
	if !rs.noSync {
		if rs.wgtN[x.c] != w.m {
			return "sync", fmt.Sprintf("runs outside no_sync but is weight gradient %d of chunk %d's %d: the reduction would launch on partial gradients", rs.wgtN[x.c], x.c, w.m)
		}
		rs.synced[x.c]++
	}
	return "", ""
}

// embeddingWgrad runs the deferred output-layer weight gradients of chunk
// c: on the chunk that defers them, once, after its last backward; outside
// no_sync their hooks reduce them.
func (rs *rankState) embeddingWgrad(w *simWorld, c int) (kind, reason string) {
	switch {
	case !rs.s.DefersEmbedding(w.m-1, c):
		return "order", fmt.Sprintf("chunk %d defers no output-layer weight gradients", c)
	case rs.embDone:
		return "order", "the deferred output-layer weight gradients a second time"
	case rs.bwdN[c] != w.m:
		return "order", fmt.Sprintf("the deferred output-layer weight gradients after %d of chunk %d's %d backwards", rs.bwdN[c], c, w.m)
	}
	rs.embDone = true
	rs.embSynced = !rs.noSync
	return "", ""
}

// gradsDone is how many microbatches' gradients chunk c has complete:
// its backwards, or in a split schedule its weight gradients.
func (rs *rankState) gradsDone(c int) int {
	if rs.s.SplitBackward {
		return rs.wgtN[c]
	}
	return rs.bwdN[c]
}

// why explains a missing receive.
func (rs *rankState) why(o Op) string {
	step, ok := rs.issued[o]
	switch {
	case !ok:
		return fmt.Sprintf(": no %v was issued", o)
	case rs.async[o] != nil && !rs.async[o].waited:
		return fmt.Sprintf(": the async %v of step %d has not been waited for", o, step)
	}
	return fmt.Sprintf(": %v was issued at step %d", o, step)
}

// post issues op j of action i on its channel and matches what it can;
// on failure it returns the kind of problem and its description.
func (w *simWorld) post(rs *rankState, i, j int, o Op, async bool) (string, error) {
	r := rs.s.Rank
	if o.Microbatch < 0 || o.Microbatch >= w.m || o.Chunk < 0 || o.Chunk >= w.v {
		return "config", fmt.Errorf("%v: microbatch or chunk out of range", o)
	}
	peer, _, ok := rs.s.peer(r, o.Chunk, o.Dir)
	switch {
	case !ok && (o.Dir == SendNext || o.Dir == RecvNext):
		return "config", fmt.Errorf("%v: chunk %d holds the last stage, which has no next stage", o, o.Chunk)
	case !ok:
		return "config", fmt.Errorf("%v: chunk %d holds the first stage, which has no previous stage", o, o.Chunk)
	case peer == r:
		return "config", fmt.Errorf("%v: the neighbouring stage is on this rank, which hands the tensor over without a message", o)
	case o.Dir == SendNext && !rs.fwd[mc{o.Microbatch, o.Chunk}]:
		return "order", fmt.Errorf("%v sends an activation whose forward has not run", o)
	case o.Dir == SendPrev && !rs.bwd[mc{o.Microbatch, o.Chunk}]:
		return "order", fmt.Errorf("%v sends a gradient whose backward has not run", o)
	}
	if step, dup := rs.issued[o]; dup {
		return "order", fmt.Errorf("%v was already issued at step %d", o, step)
	}
	rs.issued[o] = i
	if async {
		rs.async[o] = &asyncState{step: i}
	}
	key, _ := w.route(r, o)
	q := w.chans[key]
	if q == nil {
		q = &fifo{}
		w.chans[key] = q
	}
	ref := opRef{r, i, j}
	if o.Dir == SendNext || o.Dir == SendPrev {
		q.sends = append(q.sends, ref)
	} else {
		q.recvs = append(q.recvs, ref)
	}
	for len(q.sends) > 0 && len(q.recvs) > 0 {
		s, d := q.sends[0], q.recvs[0]
		q.sends, q.recvs = q.sends[1:], q.recvs[1:]
		so, do := w.opAt(s), w.opAt(d)
		if (so.Dir == SendNext) != (do.Dir == RecvPrev) {
			return "mismatch", fmt.Errorf("rank %d step %d's %v meets rank %d step %d's %v: a gradient and an activation cross between the same two ranks",
				s.rank, s.step, so, d.rank, d.step, do)
		}
		if got := w.arrival(s.rank, so); got != (mc{do.Microbatch, do.Chunk}) {
			return "mismatch", fmt.Errorf("rank %d step %d's %v arrives as %v on rank %d, but rank %d step %d's %v expects %v",
				s.rank, s.step, so, got, d.rank, d.rank, d.step, do, mc{do.Microbatch, do.Chunk})
		}
		w.ranks[s.rank].meet(s, so)
		w.ranks[d.rank].meet(d, do)
	}
	return "", nil
}

// meet marks the op at ref as having met its counterpart.
func (rs *rankState) meet(ref opRef, o Op) {
	rs.matched[[2]int{ref.step, ref.idx}] = true
	if st := rs.async[o]; st != nil {
		st.matched = true
	}
	if rs.posted && ref.step == rs.pc {
		rs.pending--
	}
}

// deliver makes a completed receive's tensor usable.
func (rs *rankState) deliver(o Op) string {
	x := mc{o.Microbatch, o.Chunk}
	var set map[mc]bool
	switch o.Dir {
	case RecvPrev:
		set = rs.inputs
	case RecvNext:
		set = rs.grads
	default:
		return ""
	}
	if set[x] {
		return fmt.Sprintf("%v is received while the earlier copy is still unused", o)
	}
	set[x] = true
	return ""
}
