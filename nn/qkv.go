package nn

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// QKVLayout describes one rank's linear_qkv output [s, b, g·(n/g + 2)·d]
// in Megatron's grouped layout: for each of the g key/value groups, its n/g
// query heads, then its key head, then its value head, d channels each.
// With g = n it is the multi-head layout head0.q, head0.k, head0.v, ….
type QKVLayout struct {
	Heads  int // n: query heads on this rank
	Groups int // g: key/value heads on this rank; n must be a multiple
	Dim    int // d: channels per head
}

// Width returns (n + 2g)·d.
func (l QKVLayout) Width() int { return (l.Heads + 2*l.Groups) * l.Dim }

// QKNorm is the per-head normalisation of queries or keys (Megatron's
// q_layernorm, k_layernorm): weight W and bias B ([d]; B nil for RMSNorm).
type QKNorm struct {
	W, B *autograd.Var
	NormOptions
}

// QKVOptions are what PrepareQKV applies besides regrouping.
type QKVOptions struct {
	// QNorm and KNorm, when set, normalise every query and key head.
	QNorm, KNorm *QKNorm
	// Rotary, when set, rotates queries and keys (after the norms): row i
	// of the table is the position of sequence index i.
	Rotary *kernels.RotaryTable
	// RotaryRows, when set, give every token its own row of Rotary instead:
	// token (i, j) (sequence index i, batch row j) turns by row
	// RotaryRows[i·b + j] (sequence-first, s·b entries; per-token position
	// ids, --reset-position-ids).
	RotaryRows []int32
}

// PrepareQKV turns linear_qkv's grouped output x [s, b, (n + 2g)·d] into
// the multi-head layout the attention cores read, [s, b, n·3·d] (per head
// q, k, v), in one pass:
//
//	q_h = rope(qnorm(q_h)),  k = rope(knorm(k_j)),  v = v_j   for head h of group j
//
// so each group's key and value are repeated for its n/g query heads (as
// Megatron's unfused attention repeats them). Backward sums the repeated
// gradients back into each group. With g = n, no norms and no rotation, x
// is returned as it is.
func PrepareQKV(t *autograd.Tape, x *autograd.Var, l QKVLayout, o QKVOptions) *autograd.Var {
	if l.Groups == l.Heads && o.QNorm == nil && o.KNorm == nil && o.Rotary == nil {
		return x
	}
	f := &qkvFn{l: l, o: o, qIn: -1, kIn: -1}
	in := []*autograd.Var{x}
	add := func(n *QKNorm) int {
		if n == nil {
			return -1
		}
		at := len(in)
		in = append(in, n.W)
		if !n.RMS {
			in = append(in, n.B)
		}
		return at
	}
	f.qIn, f.kIn = add(o.QNorm), add(o.KNorm)
	return autograd.Apply(t, f, in...)
}

type qkvFn struct {
	l        QKVLayout
	o        QKVOptions
	qIn, kIn int // index of the norm weight among the inputs, or −1
}

// qkvNorm is one side's (queries' or keys') norm in a pass: its scale,
// bias and per-head row statistics.
type qkvNorm struct {
	*QKNorm
	gamma, beta []float32
	mean, rstd  []float32 // [rows·heads]
}

type qkvState struct {
	q, k *qkvNorm
}

func (f *qkvFn) norms(in []*tensor.Tensor, rows int) (q, k *qkvNorm, err error) {
	mk := func(n *QKNorm, at, heads int) (*qkvNorm, error) {
		if n == nil {
			return nil, nil
		}
		if err := CheckParam(n.W, "qk norm weight"); err != nil {
			return nil, err
		}
		s := &qkvNorm{QKNorm: n, gamma: gammaOf(in[at], n.ZeroCentered), rstd: make([]float32, rows*heads)}
		if in[at].Len() != f.l.Dim {
			return nil, fmt.Errorf("nn: qk norm %q has %d channels, heads have %d", n.W.Name, in[at].Len(), f.l.Dim)
		}
		if !n.RMS {
			if err := CheckParam(n.B, "qk norm bias"); err != nil {
				return nil, err
			}
			s.beta = values(in[at+1])
			s.mean = make([]float32, rows*heads)
		}
		return s, nil
	}
	if q, err = mk(f.o.QNorm, f.qIn, f.l.Heads); err != nil {
		return nil, nil, err
	}
	k, err = mk(f.o.KNorm, f.kIn, f.l.Groups)
	return q, k, err
}

// forwardHead normalises (statistics slot j) and rotates one head v in
// place at sequence index i.
func (n *qkvNorm) forward(v []float32, j int) {
	if n == nil {
		return
	}
	d := len(v)
	if n.RMS {
		kernels.RMSNormForward(v, n.rstd[j:j+1], v, n.gamma, 1, d, n.Eps)
		return
	}
	kernels.LayerNormForward(v, n.mean[j:j+1], n.rstd[j:j+1], v, n.gamma, n.beta, 1, d, n.Eps)
}

func (f *qkvFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x := in[0].Contiguous()
	l := f.l
	if l.Heads <= 0 || l.Groups <= 0 || l.Heads%l.Groups != 0 || x.Rank() != 3 || x.Dim(2) != l.Width() {
		return nil, fmt.Errorf("nn: qkv %v does not hold %d query heads in %d groups of %d channels ([s, b, %d])", x.Shape(), l.Heads, l.Groups, l.Dim, l.Width())
	}
	s, b := x.Dim(0), x.Dim(1)
	if err := f.checkRotary(s, b); err != nil {
		return nil, err
	}
	rows := s * b
	q, k, err := f.norms(in, rows)
	if err != nil {
		return nil, err
	}
	d, per, w := l.Dim, l.Heads/l.Groups, l.Width()
	y := tensor.Empty(s, b, l.Heads*3*d)
	xd, yd := x.Data(), y.Data()
	parallelRows(rows, split(c, rows, w), func(_, lo, hi int) {
		kv := make([]float32, d)
		for r := lo; r < hi; r++ {
			i := f.rotaryRow(r, b)
			src, dst := xd[r*w:(r+1)*w], yd[r*3*l.Heads*d:(r+1)*3*l.Heads*d]
			for j := 0; j < l.Groups; j++ {
				g := src[j*(per+2)*d : (j+1)*(per+2)*d]
				copy(kv, g[per*d:(per+1)*d])
				k.forward(kv, r*l.Groups+j)
				if f.o.Rotary != nil {
					f.o.Rotary.Rotate(kv, d, i, false)
				}
				for h := 0; h < per; h++ {
					hh := j*per + h
					out := dst[hh*3*d : (hh+1)*3*d]
					copy(out[:d], g[h*d:(h+1)*d])
					q.forward(out[:d], r*l.Heads+hh)
					if f.o.Rotary != nil {
						f.o.Rotary.Rotate(out[:d], d, i, false)
					}
					copy(out[d:2*d], kv)
					copy(out[2*d:], g[(per+1)*d:(per+2)*d])
				}
			}
		}
	})
	if c.Recording() {
		// The norms' weights are saved as tensors, not as the slices the
		// forward read: backward reads them again (qkvState.gammas), so a
		// weight whose storage is released and gathered again in between
		// (Megatron-FSDP) is read from its storage of the moment.
		if q != nil || k != nil {
			saved := []*tensor.Tensor{x}
			if q != nil {
				saved = append(saved, in[f.qIn])
			}
			if k != nil {
				saved = append(saved, in[f.kIn])
			}
			c.Save(saved...)
		}
		c.State = qkvState{q: q, k: k}
	}
	return y, nil
}

// gammas sets the norms' scales from the weights forward saved after x.
func (st qkvState) gammas(saved []*tensor.Tensor) {
	i := 1
	for _, n := range []*qkvNorm{st.q, st.k} {
		if n != nil {
			n.gamma = gammaOf(saved[i], n.ZeroCentered)
			i++
		}
	}
}

// checkRotary checks that the rotary table has a row for every token of
// an [s, b] pass.
func (f *qkvFn) checkRotary(s, b int) error {
	r := f.o.Rotary
	if r == nil {
		return nil
	}
	rows := len(r.Cos) / (r.Rot / 2)
	if r.Rot > f.l.Dim {
		return fmt.Errorf("nn: rotary table of %d channels for %d-channel heads", r.Rot, f.l.Dim)
	}
	if f.o.RotaryRows == nil {
		if rows < s {
			return fmt.Errorf("nn: rotary table of %d positions for %d positions", rows, s)
		}
		return nil
	}
	if len(f.o.RotaryRows) != s*b {
		return fmt.Errorf("nn: %d rotary rows for %d tokens ([%d, %d])", len(f.o.RotaryRows), s*b, s, b)
	}
	for k, p := range f.o.RotaryRows {
		if p < 0 || int(p) >= rows {
			return fmt.Errorf("nn: rotary row %d of token (%d, %d) is outside the table's %d positions", p, k/b, k%b, rows)
		}
	}
	return nil
}

// rotaryRow is the rotary table row of token r (sequence-first, batch b).
func (f *qkvFn) rotaryRow(r, b int) int {
	if f.o.RotaryRows != nil {
		return int(f.o.RotaryRows[r])
	}
	return r / b
}

// backward takes the gradient dv of one normalised head back through the
// norm, writing the input gradient into dx and adding to the worker's dw,
// db; x is the head's input.
func (n *qkvNorm) backward(dx, dv, x []float32, j int, dw, db []float32) {
	d := len(x)
	if n == nil {
		copy(dx, dv)
		return
	}
	if n.RMS {
		kernels.RMSNormBackward(dx, dw, dv, x, n.rstd[j:j+1], n.gamma, 1, d)
		return
	}
	kernels.LayerNormBackward(dx, dw, db, dv, x, n.mean[j:j+1], n.rstd[j:j+1], n.gamma, 1, d)
}

func (f *qkvFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	st := c.State.(qkvState)
	l := f.l
	d, per, w := l.Dim, l.Heads/l.Groups, l.Width()
	s, b := dy.Dim(0), dy.Dim(1)
	rows := s * b
	dx := tensor.Empty(s, b, w)
	var xd []float32
	if sv := c.Saved(); len(sv) > 0 {
		xd = sv[0].Data()
		st.gammas(sv)
	}
	dyd, dxd := dy.Contiguous().Data(), dx.Data()
	nw := split(c, rows, w)
	type part struct{ qw, qb, kw, kb []float32 }
	parts := make([]part, nw)
	parallelRows(rows, nw, func(wk, lo, hi int) {
		p := &parts[wk]
		if st.q != nil {
			p.qw, p.qb = make([]float32, d), make([]float32, d)
		}
		if st.k != nil {
			p.kw, p.kb = make([]float32, d), make([]float32, d)
		}
		tmp := make([]float32, d)
		for r := lo; r < hi; r++ {
			i := f.rotaryRow(r, b)
			src, dst := dyd[r*3*l.Heads*d:(r+1)*3*l.Heads*d], dxd[r*w:(r+1)*w]
			var xr []float32
			if xd != nil {
				xr = xd[r*w : (r+1)*w]
			}
			for j := 0; j < l.Groups; j++ {
				g := dst[j*(per+2)*d : (j+1)*(per+2)*d]
				dk, dv := g[per*d:(per+1)*d], g[(per+1)*d:]
				clear(g[per*d:]) // dk and dv sum over the group's heads
				for h := 0; h < per; h++ {
					hh := j*per + h
					in := src[hh*3*d : (hh+1)*3*d]
					copy(tmp, in[:d])
					if f.o.Rotary != nil {
						f.o.Rotary.Rotate(tmp, d, i, true)
					}
					var xq []float32
					if xr != nil {
						xq = xr[j*(per+2)*d+h*d : j*(per+2)*d+(h+1)*d]
					}
					st.q.backward(g[h*d:(h+1)*d], tmp, xq, r*l.Heads+hh, p.qw, p.qb)
					kernels.AddInto(dk, in[d:2*d])
					kernels.AddInto(dv, in[2*d:])
				}
				if f.o.Rotary != nil {
					f.o.Rotary.Rotate(dk, d, i, true)
				}
				if st.k != nil {
					copy(tmp, dk)
					st.k.backward(dk, tmp, xr[j*(per+2)*d+per*d:j*(per+2)*d+(per+1)*d], r*l.Groups+j, p.kw, p.kb)
				}
			}
		}
	})
	grads := make([]*tensor.Tensor, 1, 5)
	grads[0] = dx
	for _, side := range []struct {
		n      *qkvNorm
		at     int
		pw, pb func(part) []float32
	}{
		{st.q, f.qIn, func(p part) []float32 { return p.qw }, func(p part) []float32 { return p.qb }},
		{st.k, f.kIn, func(p part) []float32 { return p.kw }, func(p part) []float32 { return p.kb }},
	} {
		if side.n == nil {
			continue
		}
		collect := func(get func(part) []float32) [][]float32 {
			out := make([][]float32, len(parts))
			for i, p := range parts {
				out[i] = get(p)
			}
			return out
		}
		if c.NeedsGrad(side.at) {
			AccumulateGrad(c, side.n.W, addAll(collect(side.pw)))
		}
		grads = append(grads, nil)
		if !side.n.RMS {
			if c.NeedsGrad(side.at + 1) {
				AccumulateGrad(c, side.n.B, addAll(collect(side.pb)))
			}
			grads = append(grads, nil)
		}
	}
	return grads, nil
}

// StateBytes is the memory of the saved per-head norm statistics.
func (st qkvState) StateBytes() int64 {
	var n int64
	for _, s := range []*qkvNorm{st.q, st.k} {
		if s != nil {
			n += 4 * int64(cap(s.mean)+cap(s.rstd))
		}
	}
	return n
}

// gammaOf returns a norm weight's scale as float32: w, or 1 + w when
// zeroCentered.
func gammaOf(w *tensor.Tensor, zeroCentered bool) []float32 {
	g := values(w)
	if !zeroCentered {
		return g
	}
	out := make([]float32, len(g))
	for i, v := range g {
		out[i] = v + 1
	}
	return out
}
