package nn_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// refNorm is LayerNorm or RMSNorm of the rows of x (h wide) in float64,
// with γ = w (+1 zero-centred) and bias b (LayerNorm only).
func refNorm(x, w, b []float64, h int, rms, zc bool, eps float64) []float64 {
	g := append([]float64(nil), w...)
	if zc {
		for i := range g {
			g[i]++
		}
	}
	if !rms {
		return refLayerNorm(x, g, b, h, eps)
	}
	y := make([]float64, len(x))
	for r := 0; r < len(x)/h; r++ {
		row := x[r*h : (r+1)*h]
		var ms float64
		for _, v := range row {
			ms += v * v
		}
		inv := 1 / math.Sqrt(ms/float64(h)+eps)
		for j, v := range row {
			y[r*h+j] = v * inv * g[j]
		}
	}
	return y
}

// TestNormGradcheck checks RMSNorm and the zero-centred LayerNorm and
// RMSNorm (output and every gradient) against float64 references.
func TestNormGradcheck(t *testing.T) {
	for _, c := range []struct{ rms, zc bool }{{true, false}, {false, true}, {true, true}} {
		for i, shape := range [][]int{{4, 7}, {2, 3, 5}, {1, 1, 16}} {
			h := shape[len(shape)-1]
			in := []*tensor.Tensor{gradcheck.Randn(uint64(i), 1, shape...), gradcheck.Randn(uint64(i+10), 0.5, h)}
			grad := []bool{true, true}
			if !c.rms {
				in, grad = append(in, gradcheck.Randn(uint64(i+20), 1, h)), append(grad, true)
			}
			o := nn.NormOptions{RMS: c.rms, Eps: 1e-5, ZeroCentered: c.zc}
			err := gradcheck.Check(gradcheck.Case{
				Inputs: in, Grad: grad, Seed: uint64(i),
				Op: func(t *autograd.Tape, v []*autograd.Var) *autograd.Var {
					var b *autograd.Var
					if !c.rms {
						b = v[2]
					}
					return nn.Norm(t, v[0], v[1], b, o)
				},
				Ref: func(v [][]float64) []float64 {
					var b []float64
					if !c.rms {
						b = v[2]
					}
					return refNorm(v[0], v[1], b, h, c.rms, c.zc, 1e-5)
				},
			})
			if err != nil {
				t.Errorf("rms=%v zero-centred=%v shape %v: %v", c.rms, c.zc, shape, err)
			}
		}
	}
}

// refAct is act(u) in float64.
func refAct(act kernels.Activation, u float64) float64 {
	switch act {
	case kernels.GELUTanh:
		return 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u)))
	case kernels.GELUErf:
		return 0.5 * u * (1 + math.Erf(u/math.Sqrt2))
	case kernels.SiLU:
		return u / (1 + math.Exp(-u))
	case kernels.SquaredReLU:
		r := math.Max(u, 0)
		return r * r
	}
	panic("unknown activation")
}

// TestMLPActivationGradcheck checks every activation, plain and gated,
// with and without a bias, against a float64 reference.
func TestMLPActivationGradcheck(t *testing.T) {
	names := map[kernels.Activation]string{kernels.GELUTanh: "gelu-tanh", kernels.GELUErf: "gelu-erf", kernels.SiLU: "silu", kernels.SquaredReLU: "squared-relu"}
	for act, name := range names {
		for _, gated := range []bool{false, true} {
			for _, bias := range []bool{false, true} {
				n := 6
				in := []*tensor.Tensor{gradcheck.Randn(1, 1.5, 3, 2, n)}
				if bias {
					in = append(in, gradcheck.Randn(2, 0.5, n))
				}
				err := gradcheck.Check(gradcheck.Case{
					Inputs: in, Grad: []bool{true, true}[:len(in)], Seed: 3,
					Op: func(t *autograd.Tape, v []*autograd.Var) *autograd.Var {
						var b *autograd.Var
						if bias {
							b = v[1]
						}
						return nn.MLPActivation(t, v[0], b, act, gated)
					},
					Ref: func(v [][]float64) []float64 {
						x := v[0]
						u := append([]float64(nil), x...)
						if bias {
							for i := range u {
								u[i] += v[1][i%n]
							}
						}
						if !gated {
							for i := range u {
								u[i] = refAct(act, u[i])
							}
							return u
						}
						out := make([]float64, 0, len(u)/2)
						for r := 0; r < len(u)/n; r++ {
							for j := 0; j < n/2; j++ {
								out = append(out, refAct(act, u[r*n+j])*u[r*n+n/2+j])
							}
						}
						return out
					},
				})
				if err != nil {
					t.Errorf("%s gated=%v bias=%v: %v", name, gated, bias, err)
				}
			}
		}
	}
}

// refQKV is PrepareQKV in float64: per row (sequence index i = row/b,
// position pos[i]; with len(pos) = s·b, position pos[row]) and group, the
// query heads and the key normalised (when qw, kw are set) and rotated
// (rot > 0), the key and value repeated for the group's heads.
func refQKV(x []float64, s, b int, l nn.QKVLayout, qw, qb, kw, kb []float64, rms, zc bool, rot int, pos []int, interleaved bool) []float64 {
	d, per := l.Dim, l.Heads/l.Groups
	w := l.Width()
	out := make([]float64, 0, s*b*l.Heads*3*d)
	norm := func(v, w, b []float64) []float64 {
		if w == nil {
			return v
		}
		return refNorm(v, w, b, d, rms, zc, 1e-5)
	}
	rotate := func(v []float64, r int) []float64 {
		if rot == 0 {
			return v
		}
		if len(pos) == s*b {
			return rotateRef(v, pos[r], rot, 100, interleaved)
		}
		return rotateRef(v, pos[r/b], rot, 100, interleaved)
	}
	for r := 0; r < s*b; r++ {
		row := x[r*w : (r+1)*w]
		for j := 0; j < l.Groups; j++ {
			g := row[j*(per+2)*d : (j+1)*(per+2)*d]
			k := rotate(norm(g[per*d:(per+1)*d], kw, kb), r)
			for h := 0; h < per; h++ {
				out = append(out, rotate(norm(g[h*d:(h+1)*d], qw, qb), r)...)
				out = append(out, k...)
				out = append(out, g[(per+1)*d:]...)
			}
		}
	}
	return out
}

// TestPrepareQKVGradcheck checks the regrouping of grouped queries (1, 2
// and 4 groups of 4 heads), RoPE (full and half, interleaved or not) and
// the q/k norms (LayerNorm and RMSNorm, zero-centred or not) against a
// float64 reference, outputs and every gradient.
func TestPrepareQKVGradcheck(t *testing.T) {
	const s, b, d = 5, 2, 8
	for _, c := range []struct {
		groups, rot int
		interleaved bool
		qk, rms, zc bool
	}{
		{1, 8, false, false, false, false}, {2, 4, true, false, false, false}, {4, 8, true, false, false, false},
		{2, 0, false, true, false, false}, {2, 8, false, true, true, false}, {1, 4, true, true, false, true},
		{4, 0, false, true, true, true},
	} {
		name := fmt.Sprintf("groups%d/rot%d/interleaved=%v/qk=%v/rms=%v/zc=%v", c.groups, c.rot, c.interleaved, c.qk, c.rms, c.zc)
		l := nn.QKVLayout{Heads: 4, Groups: c.groups, Dim: d}
		var table *kernels.RotaryTable
		pos := []int{3, 0, 7, 1, 4} // any positions: under CP they are the rank's chunks
		if c.rot > 0 {
			var err error
			if table, err = kernels.NewRotaryTable(pos, c.rot, 100, c.interleaved); err != nil {
				t.Fatal(err)
			}
		}
		in := []*tensor.Tensor{gradcheck.Randn(1, 1, s, b, l.Width())}
		if c.qk {
			for i := 0; i < 2; i++ {
				in = append(in, gradcheck.Randn(uint64(10+i), 0.5, d))
				if !c.rms {
					in = append(in, gradcheck.Randn(uint64(20+i), 0.5, d))
				}
			}
		}
		grad := make([]bool, len(in))
		for i := range grad {
			grad[i] = true
		}
		split := func() (qw, qb, kw, kb int) {
			if !c.qk {
				return -1, -1, -1, -1
			}
			if c.rms {
				return 1, -1, 2, -1
			}
			return 1, 2, 3, 4
		}
		qwi, qbi, kwi, kbi := split()
		err := gradcheck.Check(gradcheck.Case{
			Inputs: in, Grad: grad, Seed: 4,
			Op: func(t *autograd.Tape, v []*autograd.Var) *autograd.Var {
				o := nn.QKVOptions{Rotary: table}
				if c.qk {
					no := nn.NormOptions{RMS: c.rms, Eps: 1e-5, ZeroCentered: c.zc}
					o.QNorm, o.KNorm = &nn.QKNorm{W: v[qwi], NormOptions: no}, &nn.QKNorm{W: v[kwi], NormOptions: no}
					if !c.rms {
						o.QNorm.B, o.KNorm.B = v[qbi], v[kbi]
					}
				}
				return nn.PrepareQKV(t, v[0], l, o)
			},
			Ref: func(v [][]float64) []float64 {
				at := func(i int) []float64 {
					if i < 0 {
						return nil
					}
					return v[i]
				}
				return refQKV(v[0], s, b, l, at(qwi), at(qbi), at(kwi), at(kbi), c.rms, c.zc, c.rot, pos, c.interleaved)
			},
		})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPrepareQKVRotaryRows: with a row of the rotary table per token
// (per-token position ids: the two batch rows at different positions,
// repeats and resets), the rotation of every query and key head and the
// gradients equal the float64 reference rotating each token by its own
// position; a row outside the table is an error.
func TestPrepareQKVRotaryRows(t *testing.T) {
	const s, b, d = 5, 2, 8
	table, err := kernels.NewRotaryTable([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 6, 100, false)
	if err != nil {
		t.Fatal(err)
	}
	rows := []int32{0, 9, 1, 0, 2, 1, 0, 2, 7, 3} // sequence-first: token (i, j) at i·b + j
	pos := make([]int, len(rows))
	for k, r := range rows {
		pos[k] = int(r)
	}
	l := nn.QKVLayout{Heads: 4, Groups: 2, Dim: d}
	err = gradcheck.Check(gradcheck.Case{
		Inputs: []*tensor.Tensor{gradcheck.Randn(3, 1, s, b, l.Width())}, Grad: []bool{true}, Seed: 5,
		Op: func(t *autograd.Tape, v []*autograd.Var) *autograd.Var {
			return nn.PrepareQKV(t, v[0], l, nn.QKVOptions{Rotary: table, RotaryRows: rows})
		},
		Ref: func(v [][]float64) []float64 {
			return refQKV(v[0], s, b, l, nil, nil, nil, nil, false, false, 6, pos, false)
		},
	})
	if err != nil {
		t.Error(err)
	}
	bad := append([]int32(nil), rows...)
	bad[7] = 10
	tape := autograd.NewTape(context.Background())
	nn.PrepareQKV(tape, autograd.Const(tensor.New(s, b, l.Width())), l, nn.QKVOptions{Rotary: table, RotaryRows: bad})
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "rotary row 10 of token (3, 1) is outside the table's 10 positions") {
		t.Errorf("row outside the table: err = %v", err)
	}
}

// rotateRef rotates the first rot channels of v by position pos in float64.
func rotateRef(v []float64, pos, rot int, base float64, interleaved bool) []float64 {
	v = append([]float64(nil), v...)
	for k := 0; k < rot/2; k++ {
		inv := 1 / math.Pow(base, float64(2*k)/float64(rot))
		c, sn := math.Cos(float64(pos)*inv), math.Sin(float64(pos)*inv)
		ia, ib := k, k+rot/2
		if interleaved {
			ia, ib = 2*k, 2*k+1
		}
		a, b := v[ia], v[ib]
		v[ia], v[ib] = a*c-b*sn, b*c+a*sn
	}
	return v
}
