package nn_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// attnShape is an attention problem: qkv [s, b, n·3·d].
type attnShape struct{ s, b, n, d int }

func (a attnShape) qkv() []int { return []int{a.s, a.b, a.n * 3 * a.d} }

// refAttention is causal self-attention written per query, in float64, on
// Megatron's QKV layout: the row of (position i, batch row bi) holds, for
// each head h, d query, d key and d value columns at h·3d, h·3d+d, h·3d+2d.
// Output [s, b, n·d]: out[i, bi, h·d + c] = Σ_{j≤i} P'[i,j]·V[j, c] with
// P = softmax_j≤i(Q_i·K_j/√d) and P' = P⊙mask/(1−p) when masks are given
// (masks[bi·n + h] is that pair's s×s keep mask, row-major).
func refAttention(qkv []float64, a attnShape, masks [][]byte, p float64) []float64 {
	return refSegmentAttention(qkv, a, nil, masks, p)
}

// refSegmentAttention is refAttention with the document mask of segment
// ids seg [b, s] (nil: none), explicit: key j ≤ i enters query i's softmax
// only when seg[bi, j] = seg[bi, i]; the other keys get no weight.
func refSegmentAttention(qkv []float64, a attnShape, seg []int32, masks [][]byte, p float64) []float64 {
	s, b, n, d := a.s, a.b, a.n, a.d
	sees := func(bi, i, j int) bool { return seg == nil || seg[bi*s+i] == seg[bi*s+j] }
	out := make([]float64, s*b*n*d)
	at := func(i, bi, h, part, c int) float64 { return qkv[(i*b+bi)*n*3*d+h*3*d+part*d+c] }
	scores := make([]float64, s)
	for bi := 0; bi < b; bi++ {
		for h := 0; h < n; h++ {
			for i := 0; i < s; i++ {
				m := math.Inf(-1)
				for j := 0; j <= i; j++ {
					if !sees(bi, i, j) {
						scores[j] = math.Inf(-1)
						continue
					}
					var dot float64
					for c := 0; c < d; c++ {
						dot += at(i, bi, h, 0, c) * at(j, bi, h, 1, c)
					}
					scores[j] = dot / math.Sqrt(float64(d))
					m = math.Max(m, scores[j])
				}
				var z float64
				for j := 0; j <= i; j++ {
					scores[j] = math.Exp(scores[j] - m)
					z += scores[j]
				}
				for j := 0; j <= i; j++ {
					w := scores[j] / z
					if masks != nil {
						w *= float64(masks[bi*n+h][i*s+j]) / (1 - p)
					}
					for c := 0; c < d; c++ {
						out[(i*b+bi)*n*d+h*d+c] += w * at(j, bi, h, 2, c)
					}
				}
			}
		}
	}
	return out
}

func attentionOp(heads int, p float32, state rng.State) opFunc {
	return func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
		g := rng.New(0)
		g.SetState(state)
		return nn.CausalAttention(t, in[0], heads, p, g)
	}
}

func TestAttentionGradcheck(t *testing.T) {
	for i, a := range []attnShape{{1, 1, 1, 1}, {5, 2, 3, 4}, {7, 3, 2, 3}, {4, 1, 1, 8}, {9, 1, 2, 1}} {
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{gradcheck.Randn(uint64(i), 1, a.qkv()...)},
			Grad:   []bool{true},
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				t.SetWorkers(3) // too little work to split: must still be right
				return nn.CausalAttention(t, in[0], a.n, 0, nil)
			},
			Ref:  func(in [][]float64) []float64 { return refAttention(in[0], a, nil, 0) },
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
}

// bigAttn has 14 (batch row, head) pairs of 64×64 scores: enough work for
// 3 workers, with uneven chunks of 4, 5 and 5 pairs.
var bigAttn = attnShape{64, 7, 2, 3}

func TestAttentionWorkersAgree(t *testing.T) {
	x := gradcheck.Randn(5, 1, bigAttn.qkv()...)
	for _, p := range []float32{0, 0.2} {
		state := rng.New(77).State()
		var masks [][]byte
		if p > 0 {
			masks = extractMasks(t, bigAttn, p, state)
		}
		ref := func(in [][]float64) []float64 { return refAttention(in[0], bigAttn, masks, decimal(p)) }
		name := fmt.Sprintf("attention p=%v, 3 workers", p)
		r3 := checkSampled(t, name, 3, []*tensor.Tensor{x}, []bool{true}, attentionOp(bigAttn.n, p, state), ref, 30, 1e-4)
		r1, err := run(1, []*tensor.Tensor{x}, []bool{true}, attentionOp(bigAttn.n, p, state), 99)
		if err != nil {
			t.Fatal(err)
		}
		// Each pair is computed by one worker with the same GEMMs and the
		// same mask (seeded per pair): bitwise.
		numtest.SameBits(t, name+": output, 1 vs 3 workers", r1.out, r3.out)
		numtest.SameBits(t, name+": dqkv, 1 vs 3 workers", r1.grads[0], r3.grads[0])
	}
}

// extractMasks reads the keep masks that CausalAttention draws from a
// generator in the given state, by running it on a probe of the same s, b
// and heads with head_dim d = s: Q = K = 0 makes P[i,j] = 1/(i+1) for j ≤ i,
// and V[j] = e_j makes out[i, bi, h·s + j] = P'[i,j] = mask·P[i,j]/(1−p).
// It also checks the kept values' scale. Only the causal (j ≤ i) entries
// are read; the others do not affect the output.
func extractMasks(t *testing.T, a attnShape, p float32, state rng.State) [][]byte {
	t.Helper()
	probe := attnShape{a.s, a.b, a.n, a.s}
	x := tensor.New(probe.qkv()...)
	for i := 0; i < a.s; i++ {
		for bi := 0; bi < a.b; bi++ {
			for h := 0; h < a.n; h++ {
				x.Set(1, i, bi, h*3*a.s+2*a.s+i) // V[i] = e_i
			}
		}
	}
	tape := autograd.NewTape(context.Background())
	y := attentionOp(a.n, p, state)(tape, []*autograd.Var{autograd.NewLeaf(x, "qkv", true)})
	if err := tape.Err(); err != nil {
		t.Fatal(err)
	}
	keep := 1 / (1 - decimal(p))
	masks := make([][]byte, a.b*a.n)
	for bi := 0; bi < a.b; bi++ {
		for h := 0; h < a.n; h++ {
			m := make([]byte, a.s*a.s)
			for i := 0; i < a.s; i++ {
				for j := 0; j <= i; j++ {
					v := float64(y.Value.At(i, bi, h*a.s+j))
					if v == 0 {
						continue
					}
					if want := keep / float64(i+1); math.Abs(v-want) > 1e-6*want {
						t.Fatalf("probe: kept P'[%d,%d] of pair (%d,%d) = %v, want 1/((1−p)(i+1)) = %v", i, j, bi, h, v, want)
					}
					m[i*a.s+j] = 1
				}
			}
			masks[bi*a.n+h] = m
		}
	}
	return masks
}

func TestAttentionDropoutGradcheckWithFixedMask(t *testing.T) {
	const p = 0.25
	for i, a := range []attnShape{{6, 2, 2, 3}, {5, 1, 3, 2}, {8, 3, 1, 4}} {
		state := rng.New(uint64(1000 + i)).State()
		masks := extractMasks(t, a, p, state)
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{gradcheck.Randn(uint64(i), 1, a.qkv()...)},
			Grad:   []bool{true},
			Op:     attentionOp(a.n, p, state),
			Ref:    func(in [][]float64) []float64 { return refAttention(in[0], a, masks, decimal(p)) },
			Seed:   uint64(i),
		})
		if err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
}

func TestAttentionDropoutMasks(t *testing.T) {
	const p = 0.3
	a := attnShape{48, 3, 3, 1}
	state := rng.New(9).State()
	masks := extractMasks(t, a, p, state)

	// The documented derivation: one 64-bit seed drawn from the generator;
	// pair k's mask comes from a generator seeded with splitmix64(seed+k),
	// drawn over the pair's whole s×s score matrix as kernels.Dropout does.
	g := rng.New(0)
	g.SetState(state)
	seed := g.Uint64()
	kept, live := 0, 0
	for k, m := range masks {
		want := docMask(rng.New(rng.SplitMix64(seed+uint64(k))), a.s*a.s, p)
		for i := 0; i < a.s; i++ {
			for j := 0; j <= i; j++ {
				if m[i*a.s+j] != want[i*a.s+j] {
					t.Fatalf("pair %d: mask[%d,%d] = %d, the documented stream gives %d", k, i, j, m[i*a.s+j], want[i*a.s+j])
				}
				kept += int(m[i*a.s+j])
				live++
			}
		}
	}
	frac := float64(kept) / float64(live)
	sigma := math.Sqrt(p * (1 - p) / float64(live))
	if math.Abs(frac-(1-p)) > 5*sigma {
		t.Errorf("kept fraction %.4f over %d causal entries, want %.2f ± %.4f", frac, live, 1-p, 5*sigma)
	}
	// Another generator state gives other masks.
	other := extractMasks(t, a, p, rng.New(10).State())
	same := true
	for k := range masks {
		same = same && string(masks[k]) == string(other[k])
	}
	if same {
		t.Error("two generator states gave the same masks")
	}
}

func TestAttentionDropoutRNGUse(t *testing.T) {
	a := attnShape{5, 2, 2, 3}
	x := gradcheck.Randn(1, 1, a.qkv()...)

	// Training: exactly one Uint64 is drawn, and runs from the same state
	// give the same output.
	g1, g2 := rng.New(4), rng.New(4)
	y1 := nn.CausalAttention(autograd.NewTape(context.Background()), autograd.NewLeaf(x.Clone(), "qkv", true), a.n, 0.5, g1)
	y2 := nn.CausalAttention(autograd.NewTape(context.Background()), autograd.NewLeaf(x.Clone(), "qkv", true), a.n, 0.5, g2)
	numtest.SameBits(t, "two runs from one generator state", y1.Value.Data(), y2.Value.Data())
	ref := rng.New(4)
	ref.Uint64()
	if g1.State() != ref.State() {
		t.Fatal("attention dropout did not draw exactly one Uint64 from the generator")
	}

	// Evaluation (no grad): no dropout, no random numbers.
	tape := autograd.NewTape(context.Background())
	restore := tape.NoGrad()
	g := rng.New(4)
	ye := nn.CausalAttention(tape, autograd.NewLeaf(x.Clone(), "qkv", true), a.n, 0.5, g)
	restore()
	y0 := nn.CausalAttention(autograd.NewTape(context.Background()), autograd.NewLeaf(x.Clone(), "qkv", true), a.n, 0, nil)
	numtest.SameBits(t, "evaluation vs p = 0", ye.Value.Data(), y0.Value.Data())
	if g.State() != rng.New(4).State() {
		t.Fatal("evaluation drew random numbers")
	}
	if e, _ := relErr(y0.Value.Data(), refAttention(to64(x.Data()), a, nil, 0)); e > 1e-5 {
		t.Fatalf("p = 0 output differs from the reference: %.3g", e)
	}
}

func TestAttentionShapeError(t *testing.T) {
	for _, shape := range [][]int{{4, 2, 10}, {4, 18}} {
		tape := autograd.NewTape(context.Background())
		nn.CausalAttention(tape, autograd.Const(tensor.New(shape...)), 3, 0, nil)
		if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "3 heads") {
			t.Errorf("qkv %v with 3 heads: err = %v", shape, err)
		}
	}
}
