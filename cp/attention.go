package cp

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gotron/gotron/nn"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tensor/rng"
)

// Options configure Attention.
type Options struct {
	// Type is how attention crosses the ranks (cp_comm_type).
	Type CommType
	// Groups are the rank's context-parallel groups.
	Groups *Groups
	// Dropout is the attention dropout probability; RNG gives one seed per
	// call when it is > 0 and the tape is recording.
	Dropout float32
	RNG     *rng.RNG
	// Keys, when set, make the dropout counter-based, keyed by the whole
	// sequence's places (nn.AttentionKeys; Seq is the whole sequence, cp ×
	// the rank's rows): the masks of one rank's nn.Attention, whatever the
	// split. Their heads are the tensor-parallel rank's.
	Keys *nn.AttentionKeys
	// DType is the precision of the attention's GEMM operands (Q, K, V,
	// dO, P and dS rounded to it); float32 by default.
	DType tensor.DType
	// Wait, if non-nil, accumulates the nanoseconds the ring spent blocked
	// on receives after its block computation (the transfers not hidden).
	Wait *atomic.Int64
	// Segments, when not nil, number the documents of every batch row over
	// the whole sequence, [b, s] row-major with s = cp·(local rows): the
	// rows before cp.Split (data.Batch.Segments, --reset-attention-mask).
	// A query attends to a key at or before its position only when both
	// have the same segment id (nn.AttentionOptions.Segments); blocks of
	// the split whose keys all lie in other documents are skipped. Every
	// rank passes the same whole rows.
	Segments []int32
}

// Attention is causal self-attention over a sequence split across the
// context-parallel group (zigzag, see Chunks): Megatron's core_attention
// under context parallelism, built natively.
//
// qkv [s/cp, b, heads·3·d] holds this rank's rows of linear_qkv's output in
// Megatron's per-head layout (heads: this tensor-parallel rank's); the
// result [s/cp, b, heads·d] is the attention output of the same rows, equal
// to the one-rank attention's rows up to float32 rounding: every query
// attends to the keys at or before its position in the whole sequence.
//
//   - p2p: K and V pass around the ring, the next block's transfer in
//     flight while the current one is computed; backward passes them the
//     other way with the dK, dV accumulated so far.
//   - all_gather: K and V are all-gathered, dK and dV reduce-scattered.
//   - a2a: all-to-all to whole sequences on heads/cp heads and back.
//   - a2a+p2p: all-to-all inside the first hierarchical level, the ring
//     across the second.
//
// Each block's output is merged by log-sum-exp; backward recomputes the
// probabilities from the saved per-row log-sum-exp (FlashAttention). Memory
// kept for backward: Q, K, V, the output (the tensor linear_proj keeps) and
// the log-sum-exp of the rank's rows, as the one-rank attention keeps for
// s/cp rows.
//
// With Options.Segments, attention is further restricted to each query's
// own document, as nn.Attention restricts it on one rank.
func Attention(t *autograd.Tape, qkv *autograd.Var, heads int, o Options) *autograd.Var {
	if o.DType == 0 {
		o.DType = tensor.Float32
	}
	if !t.Recording() {
		o.Dropout = 0
	}
	f := &attentionFn{o: o, heads: heads}
	if o.Dropout > 0 && o.Keys == nil {
		f.seed = o.RNG.Uint64()
	}
	return autograd.Apply(t, f, qkv)
}

type attentionFn struct {
	o     Options
	heads int
	seed  uint64
}

// attentionState is what backward needs: the plan, the log-sum-exp and the
// packed Q, KV and O (saved tensors).
type attentionState struct {
	p   *plan
	lse []float32
}

// StateBytes reports the log-sum-exp kept for backward.
func (s attentionState) StateBytes() int64 { return 4 * int64(cap(s.lse)) }

func (f *attentionFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	ctx := c.Context()
	x := in[0].Contiguous()
	p, err := newPlan(f.o, x.Shape(), f.heads)
	if err != nil {
		return nil, err
	}
	xd := f.rounded(x.Data())
	if p.a > 1 {
		if xd, err = p.toHeads(ctx, p.inner, xd, 3*p.d); err != nil {
			return nil, err
		}
	}
	q, kv := p.pack(xd)
	out := make([]float32, p.pairs()*p.rows()*p.d)
	lse := newLSE(p.pairs() * p.rows())
	k := newBlocks(p, f.o, f.seed, c.Tape().RowWorkers(p.pairs(), p.rows()*p.rows()*p.d))
	if err := f.forwardSources(ctx, p, k, q, kv, out, lse); err != nil {
		return nil, err
	}
	y := p.unpackOut(out)
	if p.a > 1 {
		if y, err = p.toSequence(ctx, p.inner, y, p.d); err != nil {
			return nil, err
		}
	}
	yt := tensor.FromSlice(y, p.sl, p.b, p.heads*p.d)
	if c.Recording() {
		// The output itself, not a packed copy: linear_proj keeps it too.
		c.Save(tensor.FromSlice(q, len(q)), tensor.FromSlice(kv, len(kv)), yt)
		c.State = attentionState{p: p, lse: lse}
	}
	return yt, nil
}

// forwardSources attends the local queries to every member's keys: its
// own only, the ring's in ring order, or the gathered ones in the same
// order (so all_gather and p2p give the same bits).
func (f *attentionFn) forwardSources(ctx context.Context, p *plan, k *blocks, q, kv, out, lse []float32) error {
	if p.ring == nil || p.ring.Size() == 1 {
		k.attend(q, kv, p.chunksOf(p.ringRank()), out, lse)
		return nil
	}
	if p.gather {
		all, err := p.allGather(ctx, kv)
		if err != nil {
			return err
		}
		n, me := p.ring.Size(), p.ring.Rank()
		for i := range n {
			src := (me - i + n) % n
			k.attend(q, all[src*len(kv):(src+1)*len(kv)], p.chunksOf(src), out, lse)
		}
		return nil
	}
	return p.ringForward(ctx, f.o.Wait, kv, func(src int, kvs []float32) {
		k.attend(q, kvs, p.chunksOf(src), out, lse)
	})
}

func (f *attentionFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	ctx := c.Context()
	st := c.State.(attentionState)
	p := st.p
	sv := c.Saved()
	q, kv, y := sv[0].Data(), sv[1].Data(), sv[2].Data()
	dyd := f.rounded(dy.Contiguous().Data())
	// δ = rowsum(dO⊙O) for every (row, batch row, head), then to the
	// packed layout with dO.
	delta := make([]float32, len(y)/p.d)
	kernels.RowDots(delta, dyd, p.d, y, p.d, p.d)
	var err error
	if p.a > 1 {
		if dyd, err = p.toHeads(ctx, p.inner, dyd, p.d); err != nil {
			return nil, err
		}
		if delta, err = p.toHeads(ctx, p.inner, delta, 1); err != nil {
			return nil, err
		}
	}
	do := p.toPairs(dyd, p.d, 0, p.d)
	delta = p.toPairs(delta, 1, 0, 1)
	dq := make([]float32, len(q))
	dkv := make([]float32, len(kv))
	k := newBlocks(p, f.o, f.seed, c.Tape().RowWorkers(p.pairs(), p.rows()*p.rows()*p.d))
	grads := func(src int, kvs, dkvs []float32) {
		k.grads(q, kvs, p.chunksOf(src), do, st.lse, delta, dq, dkvs)
	}
	switch {
	case p.ring == nil || p.ring.Size() == 1:
		grads(p.ringRank(), kv, dkv)
	case p.gather:
		if dkv, err = p.gatherBackward(ctx, kv, grads); err != nil {
			return nil, err
		}
	default:
		if dkv, err = p.ringBackward(ctx, f.o.Wait, kv, grads); err != nil {
			return nil, err
		}
	}
	dx := p.unpackQKV(dq, dkv)
	if p.a > 1 {
		if dx, err = p.toSequence(ctx, p.inner, dx, 3*p.d); err != nil {
			return nil, err
		}
	}
	return []*tensor.Tensor{tensor.FromSlice(dx, p.sl, p.b, p.heads*3*p.d)}, nil
}

// rounded returns x's values rounded to the GEMMs' precision (x itself in
// float32).
func (f *attentionFn) rounded(x []float32) []float32 {
	if f.o.DType == tensor.Float32 {
		return x
	}
	h := make([]uint16, len(x))
	out := make([]float32, len(x))
	tensor.RoundInto(f.o.DType, h, x)
	tensor.WidenInto(f.o.DType, out, h)
	return out
}

// ringRank is this rank's index in the ring (0 without one).
func (p *plan) ringRank() int {
	if p.ring == nil {
		return 0
	}
	return p.ring.Rank()
}

// allGather gathers every ring member's kv, in member order.
func (p *plan) allGather(ctx context.Context, kv []float32) ([]float32, error) {
	all := make([]float32, p.ring.Size()*len(kv))
	if err := p.ring.AllGather(ctx, comm.F32(all), comm.F32(kv)); err != nil {
		return nil, fmt.Errorf("cp: K, V all-gather over %s: %w", p.ring.Name(), err)
	}
	return all, nil
}

// gatherBackward is all_gather's backward: the gradients of every member's
// K and V, then their reduce-scatter; it returns this rank's dKV.
func (p *plan) gatherBackward(ctx context.Context, kv []float32, grads func(src int, kv, dkv []float32)) ([]float32, error) {
	all, err := p.allGather(ctx, kv)
	if err != nil {
		return nil, err
	}
	n, me := p.ring.Size(), p.ring.Rank()
	dall := make([]float32, len(all))
	for i := range n {
		src := (me - i + n) % n
		grads(src, all[src*len(kv):(src+1)*len(kv)], dall[src*len(kv):(src+1)*len(kv)])
	}
	dkv := make([]float32, len(kv))
	if err := p.ring.ReduceScatter(ctx, comm.F32(dkv), comm.F32(dall), comm.Sum); err != nil {
		return nil, fmt.Errorf("cp: dK, dV reduce-scatter over %s: %w", p.ring.Name(), err)
	}
	return dkv, nil
}

// since adds the time since t0 to w, if w is set.
func since(w *atomic.Int64, t0 time.Time) {
	if w != nil {
		w.Add(int64(time.Since(t0)))
	}
}
