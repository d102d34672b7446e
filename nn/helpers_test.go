package nn_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor"
)

// opFunc builds the operation under test on a tape from its input leaves.
type opFunc func(t *autograd.Tape, in []*autograd.Var) *autograd.Var

// refFunc is the float64 reference of an op over flattened inputs.
type refFunc func(in [][]float64) []float64

// result is what one run of an op produced.
type result struct {
	out   []float32
	grads [][]float32 // nil for inputs without a gradient
	dy    []float32
}

// run applies op on a tape with the given workers to fresh leaves (clones
// of inputs; requires[i] says which need a gradient), runs Backward with a
// N(0,1) upstream gradient drawn from dySeed, and returns the output and
// the leaves' gradients.
func run(workers int, inputs []*tensor.Tensor, requires []bool, op opFunc, dySeed uint64) (result, error) {
	tape := autograd.NewTape(context.Background())
	tape.SetWorkers(workers)
	vars := make([]*autograd.Var, len(inputs))
	for i, x := range inputs {
		vars[i] = autograd.NewLeaf(x.Clone(), fmt.Sprintf("in%d", i), requires[i])
	}
	y := op(tape, vars)
	if err := tape.Err(); err != nil {
		return result{}, err
	}
	r := result{out: append([]float32(nil), y.Value.Contiguous().Data()...)}
	dy := gradcheck.Randn(dySeed, 1, y.Value.Shape()...)
	r.dy = append([]float32(nil), dy.Data()...)
	if err := autograd.Backward(tape, y, dy); err != nil {
		return result{}, err
	}
	r.grads = make([][]float32, len(vars))
	for i, v := range vars {
		if v.Grad != nil {
			r.grads[i] = append([]float32(nil), v.Grad.Contiguous().Data()...)
		}
	}
	return r, nil
}

// relErr returns max|got−want| / (1 + max|want|), gradcheck's measure,
// and the index of the worst element; NaN in got counts as infinite.
func relErr(got []float32, want []float64) (float64, int) {
	var scale, worst float64
	at := -1
	for i := range want {
		scale = math.Max(scale, math.Abs(want[i]))
		d := math.Abs(float64(got[i]) - want[i])
		if math.IsNaN(d) {
			return math.Inf(1), i
		}
		if d > worst {
			worst, at = d, i
		}
	}
	return worst / (1 + scale), at
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// checkSampled is gradcheck for inputs too large to difference every
// element: it runs op with the given workers, compares the whole output
// with ref, and compares the gradient of each input that requires one at
// `samples` random elements with central finite differences (step 1e-4)
// of Σ dy·ref. It returns the run's result.
func checkSampled(t *testing.T, name string, workers int, inputs []*tensor.Tensor, requires []bool, op opFunc, ref refFunc, samples int, tol float64) result {
	t.Helper()
	r, err := run(workers, inputs, requires, op, 99)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	x64 := make([][]float64, len(inputs))
	for i, x := range inputs {
		x64[i] = to64(x.Contiguous().Data())
	}
	want := ref(x64)
	if e, at := relErr(r.out, want); e > tol {
		t.Fatalf("%s: output[%d] = %v, want %v (relative error %.3g)", name, at, r.out[at], want[at], e)
	}
	pick := rand.New(rand.NewPCG(uint64(len(want)), 5))
	const h = 1e-4
	for i := range inputs {
		if !requires[i] {
			continue
		}
		got := make([]float32, samples)
		fd := make([]float64, samples)
		idx := make([]int, samples)
		for s := range idx {
			k := pick.IntN(len(x64[i]))
			idx[s] = k
			orig := x64[i][k]
			x64[i][k] = orig + h
			fp := ref(x64)
			x64[i][k] = orig - h
			fm := ref(x64)
			x64[i][k] = orig
			var d float64
			for j := range fp {
				d += float64(r.dy[j]) * (fp[j] - fm[j]) / (2 * h)
			}
			fd[s] = d
			if r.grads[i] != nil {
				got[s] = r.grads[i][k]
			}
		}
		if e, at := relErr(got, fd); e > tol {
			t.Fatalf("%s: gradient of input %d at element %d = %v, finite differences give %v (relative error %.3g)", name, i, idx[at], got[at], fd[at], e)
		}
	}
	return r
}

// closeRel fails t unless max|a−b| ≤ tol·(1+max|b|).
func closeRel(t *testing.T, what string, a, b []float32, tol float64) {
	t.Helper()
	if e, at := relErr(a, to64(b)); e > tol {
		t.Fatalf("%s: element %d: %v vs %v (relative error %.3g > %.3g)", what, at, a[at], b[at], e, tol)
	}
}

// directCase describes an op whose parameters (inputs listed in params)
// accumulate their gradients straight into the parameter's Grad.
type directCase struct {
	name     string
	inputs   []*tensor.Tensor
	requires []bool
	params   []int
	op       opFunc
}

// checkDirectAccumulation verifies, for each directly accumulated
// parameter: two backward passes add up to the sum of two single passes;
// the parameter's hook runs once per pass and sees that pass's complete
// sum; and a pre-existing Grad (a view into a bigger buffer) is written in
// place, leaving the rest of the buffer untouched.
func checkDirectAccumulation(t *testing.T, c directCase) {
	t.Helper()
	single := func(seed uint64) result {
		r, err := run(1, c.inputs, c.requires, c.op, seed)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		return r
	}
	r1, r2 := single(1), single(2)

	leaves := make([]*autograd.Var, len(c.inputs))
	for i, x := range c.inputs {
		leaves[i] = autograd.NewLeaf(x.Clone(), fmt.Sprintf("%s.in%d", c.name, i), c.requires[i])
	}
	seen := make([][][]float32, len(leaves))
	for _, p := range c.params {
		leaves[p].AddGradHook(func(_ context.Context, v *autograd.Var) {
			seen[p] = append(seen[p], append([]float32(nil), v.Grad.Contiguous().Data()...))
		})
	}
	tape := autograd.NewTape(context.Background())
	pass := func(seed uint64) {
		y := c.op(tape, leaves)
		if err := tape.Err(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := autograd.Backward(tape, y, gradcheck.Randn(seed, 1, y.Value.Shape()...)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	pass(1)
	pass(2)
	for _, p := range c.params {
		if len(seen[p]) != 2 {
			t.Fatalf("%s: hook of input %d ran %d times in two passes, want 2", c.name, p, len(seen[p]))
		}
		numtest.SameBits(t, fmt.Sprintf("%s: input %d's Grad when its first hook ran", c.name, p), seen[p][0], r1.grads[p])
		sum := make([]float32, len(r1.grads[p]))
		for k := range sum {
			sum[k] = r1.grads[p][k] + r2.grads[p][k]
		}
		closeRel(t, fmt.Sprintf("%s: input %d's Grad after two passes vs the two single passes", c.name, p), leaves[p].Grad.Data(), sum, 1e-6)
		numtest.SameBits(t, fmt.Sprintf("%s: input %d's Grad at the second hook vs its final value", c.name, p), seen[p][1], leaves[p].Grad.Data())
	}

	// Pre-existing Grad views into one buffer, with room either side.
	total := 3
	for _, p := range c.params {
		total += c.inputs[p].Len() + 2
	}
	buf := make([]float32, total)
	for i := range buf {
		buf[i] = float32(i%17) * 0.25
	}
	orig := append([]float32(nil), buf...)
	for i, x := range c.inputs {
		leaves[i] = autograd.NewLeaf(x.Clone(), fmt.Sprintf("%s.in%d", c.name, i), c.requires[i])
	}
	off := make([]int, len(c.inputs))
	views := make([]*tensor.Tensor, len(c.inputs))
	at := 2
	for _, p := range c.params {
		n := c.inputs[p].Len()
		off[p] = at
		views[p] = tensor.FromSlice(buf, total).Narrow(0, at, n).View(c.inputs[p].Shape()...)
		leaves[p].Grad = views[p]
		at += n + 2
	}
	pass(1)
	inside := make([]bool, total)
	for _, p := range c.params {
		if leaves[p].Grad != views[p] {
			t.Fatalf("%s: input %d's pre-existing Grad tensor was replaced", c.name, p)
		}
		n := c.inputs[p].Len()
		want := make([]float32, n)
		for k := range want {
			want[k] = orig[off[p]+k] + r1.grads[p][k]
			inside[off[p]+k] = true
		}
		closeRel(t, fmt.Sprintf("%s: input %d's buffer view after one pass", c.name, p), buf[off[p]:off[p]+n], want, 1e-6)
	}
	for i := range buf {
		if !inside[i] && buf[i] != orig[i] {
			t.Fatalf("%s: buffer element %d outside every parameter's view changed", c.name, i)
		}
	}
}
