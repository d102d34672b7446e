package autograd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/tensor"
)

// forEach calls fn with every multi-index of shape (row-major) and its
// flat position.
func forEach(shape []int, fn func(flat int, idx []int)) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	idx := make([]int, len(shape))
	for k := 0; k < n; k++ {
		fn(k, idx)
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < shape[i] {
				break
			}
			idx[i] = 0
		}
	}
}

// flat returns the row-major position of idx in shape.
func flat(shape, idx []int) int {
	p := 0
	for i, d := range shape {
		p = p*d + idx[i]
	}
	return p
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func TestAddScaleGrad(t *testing.T) {
	for i, shape := range [][]int{{1}, {7}, {3, 5}, {2, 3, 4}} {
		a, b := gradcheck.Randn(uint64(i), 1, shape...), gradcheck.Randn(uint64(i+50), 1, shape...)
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{a, b},
			Grad:   []bool{true, true},
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				return autograd.Add(t, autograd.Scale(t, in[0], -1.75), in[1])
			},
			Ref: func(in [][]float64) []float64 {
				y := make([]float64, len(in[0]))
				for k := range y {
					y[k] = -1.75*in[0][k] + in[1][k]
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

func TestAddSameInputTwice(t *testing.T) {
	// x + x: the engine gets the same gradient tensor twice for one input
	// and must sum (not alias) it.
	err := gradcheck.Check(gradcheck.Case{
		Inputs: []*tensor.Tensor{gradcheck.Randn(1, 1, 4, 3)},
		Grad:   []bool{true},
		Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			h := autograd.Scale(t, in[0], 3)
			return autograd.Add(t, autograd.Add(t, h, h), in[0])
		},
		Ref: func(in [][]float64) []float64 {
			y := make([]float64, len(in[0]))
			for k, v := range in[0] {
				y[k] = 7 * v
			}
			return y
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestViewGrad(t *testing.T) {
	err := gradcheck.Check(gradcheck.Case{
		Inputs: []*tensor.Tensor{gradcheck.Randn(2, 1, 2, 3, 5)},
		Grad:   []bool{true},
		Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			v := autograd.View(t, autograd.Scale(t, in[0], 2), 6, -1)
			if got := v.Shape(); got[0] != 6 || got[1] != 5 {
				t.Fail(fmt.Errorf("View(6, -1) gave shape %v", got))
			}
			return v
		},
		Ref: func(in [][]float64) []float64 {
			y := make([]float64, len(in[0]))
			for k, v := range in[0] {
				y[k] = 2 * v
			}
			return y
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tape := autograd.NewTape(t.Context())
	nc := autograd.NewLeaf(gradcheck.Randn(3, 1, 3, 4).Transpose(0, 1), "nc", true)
	autograd.View(tape, nc, 12)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "non-contiguous") {
		t.Fatalf("View of a non-contiguous value: err = %v", err)
	}
}

func TestNarrowGrad(t *testing.T) {
	cases := []struct {
		shape              []int
		dim, start, length int
	}{
		{[]int{5, 3}, 0, 1, 3},
		{[]int{2, 7, 3}, 1, 2, 4},
		{[]int{2, 3, 5}, -1, 4, 1},
		{[]int{4}, 0, 0, 4},
	}
	for i, c := range cases {
		x := gradcheck.Randn(uint64(10+i), 1, c.shape...)
		dim := c.dim
		if dim < 0 {
			dim += len(c.shape)
		}
		outShape := append([]int(nil), c.shape...)
		outShape[dim] = c.length
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{x},
			Grad:   []bool{true},
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				return autograd.Narrow(t, in[0], c.dim, c.start, c.length)
			},
			Ref: func(in [][]float64) []float64 {
				y := make([]float64, numel(outShape))
				forEach(outShape, func(k int, idx []int) {
					src := append([]int(nil), idx...)
					src[dim] += c.start
					y[k] = in[0][flat(c.shape, src)]
				})
				return y
			},
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("case %d %+v: %v", i, c, err)
		}
	}
	tape := autograd.NewTape(t.Context())
	autograd.Narrow(tape, autograd.Const(tensor.New(3, 4)), 1, 2, 3)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "Narrow(1, 2, 3)") {
		t.Fatalf("Narrow past the end: err = %v", err)
	}
}

func TestCatGrad(t *testing.T) {
	for _, dim := range []int{0, 1, -1} {
		shapes := [][]int{{3, 2, 4}, {3, 2, 4}, {3, 2, 4}}
		d := dim
		if d < 0 {
			d += 3
		}
		shapes[1][d], shapes[2][d] = 1, 3
		ins := []*tensor.Tensor{
			gradcheck.Randn(21, 1, shapes[0]...),
			gradcheck.Randn(22, 1, shapes[1]...),
			gradcheck.Randn(23, 1, shapes[2]...),
		}
		outShape := append([]int(nil), shapes[0]...)
		outShape[d] = shapes[0][d] + shapes[1][d] + shapes[2][d]
		err := gradcheck.Check(gradcheck.Case{
			Inputs: ins,
			Grad:   []bool{true, false, true}, // the middle one is a constant
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				return autograd.Cat(t, dim, in...)
			},
			Ref: func(in [][]float64) []float64 {
				y := make([]float64, numel(outShape))
				forEach(outShape, func(k int, idx []int) {
					j := append([]int(nil), idx...)
					for p, s := range shapes {
						if j[d] < s[d] {
							y[k] = in[p][flat(s, j)]
							return
						}
						j[d] -= s[d]
					}
				})
				return y
			},
			Seed: uint64(dim + 5),
		})
		if err != nil {
			t.Errorf("Cat along %d: %v", dim, err)
		}
	}
}

func TestCatConstantGetsNoGrad(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	a := autograd.NewLeaf(gradcheck.Randn(1, 1, 2, 3), "a", true)
	b := autograd.NewLeaf(gradcheck.Randn(2, 1, 2, 2), "b", false)
	y := autograd.Cat(tape, 1, a, b)
	if err := autograd.Backward(tape, y, tensor.Full(1, 2, 5)); err != nil {
		t.Fatal(err)
	}
	if b.Grad != nil {
		t.Fatal("a constant input of Cat received a gradient")
	}
	for _, v := range a.Grad.Data() {
		if v != 1 {
			t.Fatalf("Cat gradient slice: %v", a.Grad.Data())
		}
	}
}

func TestSumAndWeightedSumGrad(t *testing.T) {
	for i, shape := range [][]int{{1}, {5}, {3, 7}, {2, 3, 3}} {
		x := gradcheck.Randn(uint64(30+i), 1, shape...)
		w := gradcheck.Randn(uint64(60+i), 1, shape...)
		wd := w.Data()
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{x},
			Grad:   []bool{true},
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				// Sum and WeightedSum return 0-d tensors; viewed as [1] to Cat.
				return autograd.Cat(t, 0, autograd.View(t, autograd.Sum(t, in[0]), 1), autograd.View(t, autograd.WeightedSum(t, in[0], w), 1))
			},
			Ref: func(in [][]float64) []float64 {
				var s, ws float64
				for k, v := range in[0] {
					s += v
					ws += v * float64(wd[k])
				}
				return []float64{s, ws}
			},
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("shape %v: %v", shape, err)
		}
	}
	tape := autograd.NewTape(t.Context())
	autograd.WeightedSum(tape, autograd.Const(tensor.New(3)), tensor.New(4))
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "4 weights") {
		t.Fatalf("WeightedSum with the wrong number of weights: err = %v", err)
	}
}

func TestAddShapeMismatch(t *testing.T) {
	tape := autograd.NewTape(t.Context())
	autograd.Add(tape, autograd.Const(tensor.New(2, 3)), autograd.Const(tensor.New(3, 2)))
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "[2 3] and [3 2]") {
		t.Fatalf("Add of mismatched shapes: err = %v", err)
	}
}

func TestCompositeGraph(t *testing.T) {
	// A leaf read through several overlapping windows and reused at several
	// depths; exercises the summing of pending gradients.
	x := gradcheck.Randn(77, 1, 4, 6)
	err := gradcheck.Check(gradcheck.Case{
		Inputs: []*tensor.Tensor{x, gradcheck.Randn(78, 1, 4, 3)},
		Grad:   []bool{true, true},
		Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			l := autograd.Narrow(t, in[0], 1, 0, 3)
			r := autograd.Narrow(t, in[0], 1, 2, 3)
			h := autograd.Add(t, autograd.Scale(t, l, 2), r)
			h = autograd.Add(t, h, in[1])
			h2 := autograd.Add(t, h, autograd.Narrow(t, autograd.Scale(t, in[0], -1), 1, 3, 3))
			return autograd.Cat(t, 0, autograd.View(t, h2, -1), autograd.View(t, autograd.Sum(t, h), 1))
		},
		Ref: func(in [][]float64) []float64 {
			xv, c := in[0], in[1]
			var y []float64
			var s float64
			for i := 0; i < 4; i++ {
				for j := 0; j < 3; j++ {
					h := 2*xv[i*6+j] + xv[i*6+j+2] + c[i*3+j]
					s += h
					y = append(y, h-xv[i*6+j+3])
				}
			}
			return append(y, s)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}
