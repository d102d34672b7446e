package nn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// randomSegments returns segment ids [b, s] drawn from g: packed
// documents (a new segment after each position with probability eod, as
// counting end-of-document tokens gives) or, with scattered, ids drawn
// independently from {0, 1, 2} (not contiguous: the mask must not assume
// documents are runs).
func randomSegments(g *rng.RNG, b, s int, eod float64, scattered bool) []int32 {
	seg := make([]int32, b*s)
	for r := range b {
		var cur int32
		for i := range s {
			if scattered {
				seg[r*s+i] = int32(g.Uint64() % 3)
				continue
			}
			seg[r*s+i] = cur
			if g.Float64() < eod {
				cur++
			}
		}
	}
	return seg
}

func segmentOp(heads int, p float32, state rng.State, seg []int32, d tensor.DType) opFunc {
	return func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
		g := rng.New(0)
		g.SetState(state)
		return nn.Attention(t, in[0], heads, nn.AttentionOptions{DType: d, Dropout: p, RNG: g, Segments: seg})
	}
}

// TestAttentionSegmentsGradcheck: with segment ids (packed documents and
// scattered ids), the fused attention's output equals the float64
// reference with the explicit document mask, and its qkv gradient equals
// the reference's central finite differences (gradcheck's 1e-4).
func TestAttentionSegmentsGradcheck(t *testing.T) {
	g := rng.New(31)
	for i, a := range []attnShape{{1, 1, 1, 2}, {6, 2, 3, 4}, {9, 3, 2, 3}, {12, 2, 1, 5}} {
		for _, scattered := range []bool{false, true} {
			seg := randomSegments(g, a.b, a.s, 0.3, scattered)
			err := gradcheck.Check(gradcheck.Case{
				Inputs: []*tensor.Tensor{gradcheck.Randn(uint64(i), 1, a.qkv()...)},
				Grad:   []bool{true},
				Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
					t.SetWorkers(3)
					return nn.Attention(t, in[0], a.n, nn.AttentionOptions{Segments: seg})
				},
				Ref:  func(in [][]float64) []float64 { return refSegmentAttention(in[0], a, seg, nil, 0) },
				Seed: uint64(i),
			})
			if err != nil {
				t.Errorf("%+v, segments %v: %v", a, seg, err)
			}
		}
	}
}

// TestAttentionSegmentsLarge: on 100-token rows (two of the causal GEMMs'
// 64-row slabs) with dropout, packed documents of several lengths give the
// reference's output (1e-4 of gradcheck's measure) and sampled finite
// differences of its gradient; 1 and 3 workers give the same bits.
func TestAttentionSegmentsLarge(t *testing.T) {
	a := attnShape{100, 3, 2, 4}
	x := gradcheck.Randn(8, 1, a.qkv()...)
	g := rng.New(2)
	for _, c := range []struct {
		eod float64
		p   float32
	}{{0.02, 0}, {0.1, 0.2}, {0.5, 0}} {
		seg := randomSegments(g, a.b, a.s, c.eod, false)
		state := rng.New(77).State()
		var masks [][]byte
		if c.p > 0 {
			masks = extractMasks(t, a, c.p, state)
		}
		name := fmt.Sprintf("eod %v, p %v", c.eod, c.p)
		ref := func(in [][]float64) []float64 { return refSegmentAttention(in[0], a, seg, masks, decimal(c.p)) }
		op := segmentOp(a.n, c.p, state, seg, tensor.Float32)
		r3 := checkSampled(t, name, 3, []*tensor.Tensor{x}, []bool{true}, op, ref, 30, 1e-4)
		r1, err := run(1, []*tensor.Tensor{x}, []bool{true}, op, 99)
		if err != nil {
			t.Fatal(err)
		}
		numtest.SameBits(t, name+": output, 1 vs 3 workers", r1.out, r3.out)
		numtest.SameBits(t, name+": dqkv, 1 vs 3 workers", r1.grads[0], r3.grads[0])
	}
}

// TestAttentionOneSegmentIsCausal: segment ids that put every token of a
// row in one document (a different id per row) give the bits of plain
// causal attention — output and gradient, in float32 and bfloat16, with
// dropout — and so do nil segments through Attention and CausalAttentionIn.
func TestAttentionOneSegmentIsCausal(t *testing.T) {
	a := attnShape{70, 2, 2, 4}
	x := gradcheck.Randn(3, 1, a.qkv()...)
	seg := make([]int32, a.b*a.s)
	for i := range seg {
		seg[i] = int32(5 + i/a.s)
	}
	for _, d := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
		state := rng.New(4).State()
		plain := func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			g := rng.New(0)
			g.SetState(state)
			return nn.CausalAttentionIn(d, t, in[0], a.n, 0.1, g)
		}
		want, err := run(2, []*tensor.Tensor{x}, []bool{true}, plain, 5)
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string][]int32{"one segment": seg, "nil": nil} {
			got, err := run(2, []*tensor.Tensor{x}, []bool{true}, segmentOp(a.n, 0.1, state, s, d), 5)
			if err != nil {
				t.Fatal(err)
			}
			numtest.SameBits(t, fmt.Sprintf("%v %s: output", d, name), got.out, want.out)
			numtest.SameBits(t, fmt.Sprintf("%v %s: dqkv", d, name), got.grads[0], want.grads[0])
		}
	}
}

// TestAttentionSegmentsChangeTheResult: a second document in a row changes
// its tokens' outputs and leaves the first document's alone (the mask is
// applied, and only where it should be).
func TestAttentionSegmentsChangeTheResult(t *testing.T) {
	a := attnShape{20, 1, 2, 4}
	x := gradcheck.Randn(6, 1, a.qkv()...)
	seg := make([]int32, a.s)
	for i := 12; i < a.s; i++ {
		seg[i] = 1
	}
	plain, err := run(1, []*tensor.Tensor{x}, []bool{true}, segmentOp(a.n, 0, rng.New(1).State(), nil, tensor.Float32), 1)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := run(1, []*tensor.Tensor{x}, []bool{true}, segmentOp(a.n, 0, rng.New(1).State(), seg, tensor.Float32), 1)
	if err != nil {
		t.Fatal(err)
	}
	w := a.b * a.n * a.d
	numtest.SameBits(t, "the first document's output", packed.out[:12*w], plain.out[:12*w])
	for i := 12; i < a.s; i++ {
		same := true
		for k := i * w; k < (i+1)*w; k++ {
			same = same && packed.out[k] == plain.out[k]
		}
		if same {
			t.Errorf("token %d of the second document has the unmasked output", i)
		}
	}
}

// TestAttentionSegmentsShapeError: segment ids not covering [b, s] are an
// error naming the counts.
func TestAttentionSegmentsShapeError(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	nn.Attention(tape, autograd.Const(tensor.New(4, 2, 6)), 1, nn.AttentionOptions{Segments: make([]int32, 7)})
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "7 segment ids for 2 batch rows of 4 positions") {
		t.Errorf("err = %v", err)
	}
}
