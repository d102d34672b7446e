package nn_test

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// decimal returns the float64 of p's shortest decimal form (0.1f → 0.1),
// the value kernels.Dropout documents computing 1/(1 − p) from.
func decimal(p float32) float64 {
	d, err := strconv.ParseFloat(strconv.FormatFloat(float64(p), 'g', -1, 32), 64)
	if err != nil {
		panic(err)
	}
	return d
}

// docMask is the keep mask of n elements that kernels.Dropout documents:
// one g.Uint64() per pair of elements, its low 32 bits for element 2k and
// its high 32 bits for element 2k+1 (an odd tail uses the low half of one
// more draw); element kept iff its 32-bit value ≥ round(p·2^32).
func docMask(g *rng.RNG, n int, p float32) []byte {
	thresh := uint64(math.Round(decimal(p) * (1 << 32)))
	m := make([]byte, n)
	for i := 0; i < n; i += 2 {
		u := g.Uint64()
		if u&0xFFFFFFFF >= thresh {
			m[i] = 1
		}
		if i+1 < n && u>>32 >= thresh {
			m[i+1] = 1
		}
	}
	return m
}

func TestDropoutIdentityCases(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	x := autograd.NewLeaf(tensor.Full(1, 4), "x", true)
	g := rng.New(3)
	before := g.State()
	if nn.Dropout(tape, x, 0, g) != x {
		t.Fatal("p = 0 is not the identity")
	}
	restore := tape.NoGrad()
	if nn.Dropout(tape, x, 0.5, g) != x {
		t.Fatal("dropout under NoGrad (evaluation) is not the identity")
	}
	restore()
	if g.State() != before {
		t.Fatal("an identity dropout drew random numbers")
	}
}

func TestDropoutMatchesDocumentedMask(t *testing.T) {
	for _, n := range []int{1, 2, 7, 1000} {
		for _, p := range []float32{0.1, 0.5, 0.9} {
			x := gradcheck.Randn(uint64(n), 1, n)
			tape := autograd.NewTape(context.Background())
			y := nn.Dropout(tape, autograd.NewLeaf(x, "x", true), p, rng.New(42))
			mask := docMask(rng.New(42), n, p)
			scale := float32(1 / (1 - decimal(p)))
			for i, v := range y.Value.Data() {
				want := x.Data()[i] * float32(mask[i]) * scale
				if v != want {
					t.Fatalf("n %d p %v: y[%d] = %v, want %v (mask %d)", n, p, i, v, want, mask[i])
				}
			}
		}
	}
}

func TestDropoutKeptFraction(t *testing.T) {
	const n = 100000
	for _, p := range []float32{0.1, 0.3, 0.7} {
		tape := autograd.NewTape(context.Background())
		y := nn.Dropout(tape, autograd.NewLeaf(tensor.Full(1, n), "x", true), p, rng.New(uint64(p*100)))
		kept := 0
		scale := float32(1 / (1 - decimal(p)))
		for _, v := range y.Value.Data() {
			switch v {
			case 0:
			case scale:
				kept++
			default:
				t.Fatalf("p %v: element %v is neither 0 nor 1/(1−p) = %v", p, v, scale)
			}
		}
		frac := float64(kept) / n
		sigma := math.Sqrt(float64(p) * (1 - float64(p)) / n)
		if math.Abs(frac-(1-float64(p))) > 5*sigma {
			t.Errorf("p %v: kept fraction %.4f, want %.4f ± %.4f", p, frac, 1-p, 5*sigma)
		}
	}
}

func TestDropoutReproducibleAndGradcheck(t *testing.T) {
	const p = 0.3
	for i, shape := range [][]int{{1}, {5, 3}, {2, 3, 7}} {
		x := gradcheck.Randn(uint64(i), 1, shape...)
		seed := uint64(100 + i)
		a := nn.Dropout(autograd.NewTape(context.Background()), autograd.NewLeaf(x.Clone(), "x", true), p, rng.New(seed))
		b := nn.Dropout(autograd.NewTape(context.Background()), autograd.NewLeaf(x.Clone(), "x", true), p, rng.New(seed))
		numtest.SameBits(t, "two runs from one generator state", a.Value.Data(), b.Value.Data())

		// With the mask fixed (the generator restarted from the same state),
		// the output is linear in x.
		mask := docMask(rng.New(seed), x.Len(), p)
		scale := 1 / (1 - decimal(p))
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{x},
			Grad:   []bool{true},
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				return nn.Dropout(t, in[0], p, rng.New(seed))
			},
			Ref: func(in [][]float64) []float64 {
				y := make([]float64, len(in[0]))
				for k, v := range in[0] {
					y[k] = v * float64(mask[k]) * scale
				}
				return y
			},
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("shape %v: %v", shape, err)
		}
	}
}
