package gpt

import (
	"fmt"
	"math"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tp"
)

// MLA is a layer's multi-latent attention (Megatron's MLASelfAttention,
// self_attention.*; DeepSeek-V2 §2.1) in place of linear_qkv, with the
// layer's Proj as linear_proj [h, n·v_head_dim/tp]. With r =
// qk_pos_emb_head_dim and q_d = qk_head_dim + r:
//
//	q        = q_proj(x), or q_up(q_layernorm(q_down(x)))          [s, b, n, q_d]
//	kv_c|k_r = kv_down(x)                                           [s, b, kv_lora_rank + r]
//	k|v      = kv_up(kv_layernorm(kv_c))                            [s, b, n, qk_head_dim + v_head_dim]
//	query    = [q_nope; rope(q_r)],  key = [k; rope(k_r)] (k_r shared by the heads)
//	out      = softmax(query·keyᵀ·m²/√q_d + causal)·v
//
// q_layernorm and kv_layernorm exist under qk_layernorm only (the
// reference's local spec has IdentityOp otherwise). Column-parallel
// projections split heads over TP; the down projections are gathered
// back whole (as the reference's ColumnParallelLinear followed by its
// gather) and, under sequence parallelism, the latents scattered to the
// sequence shards again; k_r stays whole.
type MLA struct {
	QProj  *tp.ColumnParallelLinear // linear_q_proj [n·q_d/tp, h] (q_lora_rank 0)
	QDown  *tp.ColumnParallelLinear // linear_q_down_proj [q_lora_rank/tp, h]
	QUp    *tp.ColumnParallelLinear // linear_q_up_proj [n·q_d/tp, q_lora_rank]
	KVDown *tp.ColumnParallelLinear // linear_kv_down_proj [(kv_lora_rank + r)/tp, h]
	KVUp   *tp.ColumnParallelLinear // linear_kv_up_proj [n·(qk_head_dim + v_head_dim)/tp, kv_lora_rank]
	// QNormW, QNormB are q_layernorm [q_lora_rank], KVNormW, KVNormB
	// kv_layernorm [kv_lora_rank] (nil: none).
	QNormW, QNormB, KVNormW, KVNormB *nn.Parameter
}

// mlaDraws are the sizes an MLA layer draws for its projections, in
// order: linear_q_proj, or linear_q_down_proj and linear_q_up_proj, then
// linear_kv_down_proj and linear_kv_up_proj (linear_proj follows, as in
// every layer).
func mlaDraws(cfg config.TransformerConfig) []int {
	a, h, n := cfg.MLA, cfg.HiddenSize, cfg.NumAttentionHeads
	qd := a.MLAQHeadDim()
	var out []int
	if a.QLoRARank > 0 {
		out = append(out, a.QLoRARank*h, n*qd*a.QLoRARank)
	} else {
		out = append(out, n*qd*h)
	}
	return append(out, (a.KVLoRARank+a.QKPosEmbHeadDim)*h, n*(a.QKHeadDim+a.VHeadDim)*a.KVLoRARank)
}

// mla builds the layer's MLA projections with prefix p
// ("decoder.layers.{i}.self_attention.").
func (b *builder) mla(p string) (*MLA, error) {
	cfg := b.cfg
	a, h, n := cfg.MLA, cfg.HiddenSize, cfg.NumAttentionHeads
	qd := a.MLAQHeadDim()
	var err error
	col := func(dst **tp.ColumnParallelLinear, name string, in, out int) {
		if err != nil {
			return
		}
		*dst, err = tp.NewColumnParallelLinear(p+name, in, out, tp.ColumnParallelConfig{
			Group: b.tpg, Init: b.initMethod(cfg.InitMethodStd), SequenceParallel: b.sp, UnfusedWeightGrad: b.unfused,
		})
		if err == nil {
			b.m.add((*dst).Parameters()...)
		}
	}
	l := &MLA{}
	if a.QLoRARank > 0 {
		col(&l.QDown, "linear_q_down_proj", h, a.QLoRARank)
		col(&l.QUp, "linear_q_up_proj", a.QLoRARank, n*qd)
	} else {
		col(&l.QProj, "linear_q_proj", h, n*qd)
	}
	col(&l.KVDown, "linear_kv_down_proj", h, a.KVLoRARank+a.QKPosEmbHeadDim)
	col(&l.KVUp, "linear_kv_up_proj", a.KVLoRARank, n*(a.QKHeadDim+a.VHeadDim))
	if err != nil {
		return nil, err
	}
	if cfg.QKLayernorm {
		if a.QLoRARank > 0 {
			l.QNormW, l.QNormB = b.normOf(p+"q_layernorm", a.QLoRARank)
		}
		l.KVNormW, l.KVNormB = b.normOf(p+"kv_layernorm", a.KVLoRARank)
	}
	return l, nil
}

// parameters returns the projections' parameters in registration order.
func (l *MLA) parameters() []*nn.Parameter {
	var ps []*nn.Parameter
	for _, c := range []*tp.ColumnParallelLinear{l.QProj, l.QDown, l.QUp, l.KVDown, l.KVUp} {
		if c != nil {
			ps = append(ps, c.Parameters()...)
		}
	}
	return append(ps, nonNil(l.QNormW, l.QNormB, l.KVNormW, l.KVNormB)...)
}

// mlaHeadDim is the width d of each head's query, key and value in the
// packed input of the attention core: the wider of q_d and v_head_dim
// (the narrower padded with zeros, which change no score and no output).
func mlaHeadDim(a config.MLA) int { return max(a.MLAQHeadDim(), a.VHeadDim) }

// qkv returns the attention core's input for x ([s, b, h], [s/tp, b, h]
// under sequence parallelism): the packed [s, b, n/tp·3·d] of nn.Attention
// (mlaHeadDim), queries pre-scaled so that the core's 1/√d makes MLA's
// m²/√q_d.
func (l *MLA) qkv(t *autograd.Tape, x *autograd.Var, m *Model, ps *pass) (*autograd.Var, error) {
	a := m.Config.MLA
	sp := m.sequenceParallel()
	var err error
	down := func(lin *tp.ColumnParallelLinear, x *autograd.Var, scatter bool) *autograd.Var {
		var z *autograd.Var
		if err == nil {
			z, err = m.wholeColumn(t, lin, x, scatter)
		}
		return z
	}
	up := func(lin *tp.ColumnParallelLinear, x *autograd.Var) *autograd.Var {
		var z *autograd.Var
		if err == nil {
			z, _, err = lin.Forward(t, x, nil, nil)
		}
		return z
	}
	var q *autograd.Var
	if l.QProj != nil {
		q = up(l.QProj, x)
	} else if qc := down(l.QDown, x, true); err == nil {
		if l.QNormW != nil {
			qc = m.norm(t, qc, l.QNormW, l.QNormB)
		}
		q = up(l.QUp, qc)
	}
	kvc := down(l.KVDown, x, false) // [s, b, kv_lora_rank + r], the whole sequence
	if err != nil {
		return nil, err
	}
	kvLatent := autograd.Narrow(t, kvc, 2, 0, a.KVLoRARank)
	if sp {
		kvLatent = tp.ScatterToSequenceParallelRegion(t, kvLatent, m.TP)
	}
	if l.KVNormW != nil {
		kvLatent = m.norm(t, kvLatent, l.KVNormW, l.KVNormB)
	}
	kv := up(l.KVUp, kvLatent)
	if err != nil {
		return nil, err
	}
	// k_r is whole on every TP rank but feeds only the rank's heads: its
	// gradient is summed over the group (the f operator), so the gathered
	// down projection's backward, a split, hands every rank the whole sum.
	kr := tp.CopyToTensorModelParallelRegion(t, autograd.Narrow(t, kvc, 2, a.KVLoRARank, a.QKPosEmbHeadDim), m.TP)
	d := mlaHeadDim(a)
	scale := a.MLASoftmaxScale() * math.Sqrt(float64(d))
	f := &mlaPackFn{a: a, heads: m.Config.NumAttentionHeads / m.tpSize(), d: d, scale: float32(scale), rope: ps.rope, rows: ps.ropeRows}
	return autograd.Apply(t, f, q, kv, kr), t.Err()
}

// mlaPackFn packs MLA's queries q [s, b, n·q_d], keys and values kv
// [s, b, n·(qk + v)] and shared rotary keys k_r [s, b, r] into the
// attention core's [s, b, n·3·d]: per head, scale·[q_nope; rot(q_r)],
// [k_nope; rot(k_r)] and [v], each zero-padded to d. rot turns the rotary
// channels by their row's position (Model.rotary's table: MLA's
// frequencies, interleaved pairs; config.TransformerConfig.Rotary says why
// that is the reference's rotation). Backward is the transpose.
type mlaPackFn struct {
	a        config.MLA
	heads, d int
	scale    float32
	rope     *kernels.RotaryTable
	rows     []int32 // per-token positions (nil: the sequence index)
}

func (f *mlaPackFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	q, kv, kr := in[0].Contiguous(), in[1].Contiguous(), in[2].Contiguous()
	a, n, d := f.a, f.heads, f.d
	qk, r, vd, qd := a.QKHeadDim, a.QKPosEmbHeadDim, a.VHeadDim, a.MLAQHeadDim()
	s, b := q.Dim(0), q.Dim(1)
	if q.Dim(2) != n*qd || kv.Dim(2) != n*(qk+vd) || kr.Dim(2) != r || kv.Dim(0) != s || kr.Dim(0) != s {
		return nil, fmt.Errorf("gpt: MLA queries %v, keys and values %v, rotary keys %v for %d heads of %d+%d query, %d value channels", q.Shape(), kv.Shape(), kr.Shape(), n, qk, r, vd)
	}
	if f.rope == nil || f.rope.Rot > r {
		return nil, fmt.Errorf("gpt: MLA needs a rotary table of at most %d channels", r)
	}
	out := tensor.New(s, b, n*3*d)
	qd_, kvd, krd, od := q.Data(), kv.Data(), kr.Data(), out.Data()
	for i := range s {
		for j := range b {
			tok := i*b + j
			pos := f.position(i, tok)
			krot := make([]float32, r)
			copy(krot, krd[tok*r:(tok+1)*r])
			f.rope.Rotate(krot, r, pos, false)
			for h := range n {
				o := od[(tok*n+h)*3*d:]
				qh := qd_[(tok*n+h)*qd : (tok*n+h+1)*qd]
				for c, v := range qh {
					o[c] = f.scale * v
				}
				f.rope.Rotate(o[qk:qk+r], r, pos, false) // (a scaled rotation: the two commute)
				kh := kvd[(tok*n+h)*(qk+vd):]
				copy(o[d:d+qk], kh[:qk])
				copy(o[d+qk:d+qk+r], krot)
				copy(o[2*d:2*d+vd], kh[qk:qk+vd])
			}
		}
	}
	return out, nil
}

// position is the rotary table's row of token tok at sequence index i.
func (f *mlaPackFn) position(i, tok int) int {
	if f.rows != nil {
		return int(f.rows[tok])
	}
	return i
}

func (f *mlaPackFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	a, n, d := f.a, f.heads, f.d
	qk, r, vd, qd := a.QKHeadDim, a.QKPosEmbHeadDim, a.VHeadDim, a.MLAQHeadDim()
	dy = dy.Contiguous()
	s, b := dy.Dim(0), dy.Dim(1)
	dq, dkv, dkr := tensor.New(s, b, n*qd), tensor.New(s, b, n*(qk+vd)), tensor.New(s, b, r)
	g, dqd, dkvd, dkrd := dy.Data(), dq.Data(), dkv.Data(), dkr.Data()
	turn := make([]float32, r)
	for i := range s {
		for j := range b {
			tok := i*b + j
			pos := f.position(i, tok)
			kr := dkrd[tok*r : (tok+1)*r]
			for h := range n {
				o := g[(tok*n+h)*3*d:]
				qh := dqd[(tok*n+h)*qd : (tok*n+h+1)*qd]
				for c := range qh {
					qh[c] = f.scale * o[c]
				}
				f.rope.Rotate(qh[qk:qk+r], r, pos, true)
				kh := dkvd[(tok*n+h)*(qk+vd):]
				copy(kh[:qk], o[d:d+qk])
				copy(kh[qk:qk+vd], o[2*d:2*d+vd])
				copy(turn, o[d+qk:d+qk+r])
				f.rope.Rotate(turn, r, pos, true)
				kernels.AddInto(kr, turn)
			}
		}
	}
	return []*tensor.Tensor{dq, dkv, dkr}, nil
}

// mlaValues takes each head's first v_head_dim channels of the attention
// core's output ctx [s, b, n·d]: [s, b, n·v_head_dim], linear_proj's input.
func mlaValues(t *autograd.Tape, ctx *autograd.Var, heads, d, vd int) *autograd.Var {
	if d == vd {
		return ctx
	}
	return autograd.Apply(t, mlaValuesFn{heads: heads, d: d, vd: vd}, ctx)
}

type mlaValuesFn struct{ heads, d, vd int }

func (f mlaValuesFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	s, b := x.Dim(0), x.Dim(1)
	out := tensor.New(s, b, f.heads*f.vd)
	xd, od := x.Data(), out.Data()
	for k := range s * b * f.heads {
		copy(od[k*f.vd:(k+1)*f.vd], xd[k*f.d:k*f.d+f.vd])
	}
	return out, nil
}

func (f mlaValuesFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	dy = dy.Contiguous()
	s, b := dy.Dim(0), dy.Dim(1)
	dx := tensor.New(s, b, f.heads*f.d)
	gd, dd := dy.Data(), dx.Data()
	for k := range s * b * f.heads {
		copy(dd[k*f.d:k*f.d+f.vd], gd[k*f.vd:(k+1)*f.vd])
	}
	return []*tensor.Tensor{dx}, nil
}

// wholeColumn applies the column-parallel lin to x ([s, b, in], or
// [s/tp, b, in] under sequence parallelism) and gathers its output whole
// over TP, [s, b, out] on every rank (the reference's ColumnParallelLinear
// followed by gather_from_tensor_model_parallel_region); with scatter and
// under sequence parallelism, back to the rank's sequence shard
// [s/tp, b, out]. MTP's eh_proj and MLA's down projections are such.
func (m *Model) wholeColumn(t *autograd.Tape, lin *tp.ColumnParallelLinear, x *autograd.Var, scatter bool) (*autograd.Var, error) {
	y, _, err := lin.Forward(t, x, nil, nil)
	if err != nil {
		return nil, err
	}
	y = tp.GatherFromTensorModelParallelRegion(t, y, m.TP)
	if scatter && m.sequenceParallel() {
		y = tp.ScatterToSequenceParallelRegion(t, y, m.TP)
	}
	return y, nil
}
