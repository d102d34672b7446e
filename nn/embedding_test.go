package nn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/internal/gradcheck"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

func refEmbedding(table []float64, ids []int32, h int) []float64 {
	y := make([]float64, 0, len(ids)*h)
	for _, id := range ids {
		y = append(y, table[int(id)*h:int(id+1)*h]...)
	}
	return y
}

// refAddPositions is x[i, b, :] + pos[i, :] for x [s, b, h].
func refAddPositions(x, pos []float64, s, b, h int) []float64 {
	y := make([]float64, len(x))
	for i := 0; i < s; i++ {
		for j := 0; j < b; j++ {
			for k := 0; k < h; k++ {
				y[(i*b+j)*h+k] = x[(i*b+j)*h+k] + pos[i*h+k]
			}
		}
	}
	return y
}

func TestEmbeddingGradcheck(t *testing.T) {
	cases := []struct {
		v, h  int
		shape []int
		ids   []int32
	}{
		{1, 1, []int{1}, []int32{0}},
		{7, 4, []int{5, 3}, []int32{0, 6, 2, 2, 6, 6, 1, 0, 3, 3, 3, 5, 4, 6, 2}}, // repeats
		{5, 3, []int{2, 2, 2}, []int32{4, 4, 4, 4, 0, 1, 2, 4}},
	}
	for i, c := range cases {
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{gradcheck.Randn(uint64(i), 1, c.v, c.h)},
			Grad:   []bool{true},
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				y := nn.Embedding(t, in[0], c.ids, c.shape...)
				if want := append(append([]int(nil), c.shape...), c.h); t.Err() == nil && !tensor.SameShape(y.Value, tensor.New(want...)) {
					t.Fail(fmt.Errorf("embedding output %v, want %v", y.Value.Shape(), want))
				}
				return y
			},
			Ref:  func(in [][]float64) []float64 { return refEmbedding(in[0], c.ids, c.h) },
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("case %d: %v", i, err)
		}
	}
}

func TestEmbeddingErrors(t *testing.T) {
	table := autograd.NewLeaf(tensor.New(4, 2), "embedding.word_embeddings.weight", true)
	for _, c := range []struct {
		ids   []int32
		shape []int
		want  string
	}{
		{[]int32{0, 4}, []int{2}, "id 4 at position 1"},
		{[]int32{-1}, []int{1}, "id -1 at position 0"},
		{[]int32{0, 1, 2}, []int{2}, "3 ids for shape [2]"},
	} {
		tape := autograd.NewTape(context.Background())
		nn.Embedding(tape, table, c.ids, c.shape...)
		if err := tape.Err(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "word_embeddings") {
			t.Errorf("ids %v shape %v: err = %v, want %q", c.ids, c.shape, err, c.want)
		}
	}
}

func TestAddPositionsGradcheck(t *testing.T) {
	for i, c := range [][4]int{{1, 1, 1, 1}, {3, 2, 5, 4}, {5, 3, 5, 3}, {2, 4, 7, 1}} {
		s, b, maxPos, h := c[0], c[1], c[2], c[3]
		err := gradcheck.Check(gradcheck.Case{
			Inputs: []*tensor.Tensor{gradcheck.Randn(uint64(i), 1, s, b, h), gradcheck.Randn(uint64(i+5), 1, maxPos, h)},
			Grad:   []bool{true, true},
			Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
				return nn.AddPositionsAt(t, in[0], in[1], 0)
			},
			Ref:  func(in [][]float64) []float64 { return refAddPositions(in[0], in[1], s, b, h) },
			Seed: uint64(i),
		})
		if err != nil {
			t.Errorf("s %d b %d max_pos %d h %d: %v", s, b, maxPos, h, err)
		}
	}
}

// TestAddPositionsAtGradcheck: a sequence shard starting at position start
// adds rows [start, start+s) and accumulates their gradient only.
func TestAddPositionsAtGradcheck(t *testing.T) {
	s, b, maxPos, h, start := 2, 3, 7, 4, 3
	err := gradcheck.Check(gradcheck.Case{
		Inputs: []*tensor.Tensor{gradcheck.Randn(11, 1, s, b, h), gradcheck.Randn(12, 1, maxPos, h)},
		Grad:   []bool{true, true},
		Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.AddPositionsAt(t, in[0], in[1], start)
		},
		Ref: func(in [][]float64) []float64 {
			return refAddPositions(in[0], in[1][start*h:], s, b, h)
		},
		Seed: 13,
	})
	if err != nil {
		t.Fatal(err)
	}
	tape := autograd.NewTape(context.Background())
	nn.AddPositionsAt(tape, autograd.Const(tensor.New(s, b, h)), autograd.NewLeaf(tensor.New(maxPos, h), "pos", true), 6)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "positions [6, 8) exceed max_position_embeddings 7") {
		t.Fatalf("err = %v", err)
	}
}

func TestAddPositionsErrors(t *testing.T) {
	pos := autograd.NewLeaf(tensor.New(4, 3), "position_embeddings.weight", true)
	for _, c := range []struct {
		x    []int
		want string
	}{
		{[]int{5, 1, 3}, "positions [0, 5) exceed max_position_embeddings 4"},
		{[]int{2, 1, 2}, "input [2 1 2]"},
		{[]int{2, 3}, "input [2 3]"},
	} {
		tape := autograd.NewTape(context.Background())
		nn.AddPositionsAt(tape, autograd.Const(tensor.New(c.x...)), pos, 0)
		if err := tape.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("x %v: err = %v, want %q", c.x, err, c.want)
		}
	}
}

func TestEmbeddingAndPositionsDirectAccumulation(t *testing.T) {
	ids := []int32{1, 3, 3, 0, 1, 1}
	checkDirectAccumulation(t, directCase{
		name:     "embedding",
		inputs:   []*tensor.Tensor{gradcheck.Randn(1, 1, 5, 4)},
		requires: []bool{true},
		params:   []int{0},
		op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.Embedding(t, in[0], ids, 3, 2)
		},
	})
	checkDirectAccumulation(t, directCase{
		name:     "position embedding",
		inputs:   []*tensor.Tensor{gradcheck.Randn(2, 1, 3, 2, 4), gradcheck.Randn(3, 1, 5, 4)},
		requires: []bool{true, true},
		params:   []int{1},
		op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.AddPositionsAt(t, in[0], in[1], 0)
		},
	})
	// GPT's embedding: word + position, both accumulated directly.
	checkDirectAccumulation(t, directCase{
		name:     "word + position embedding",
		inputs:   []*tensor.Tensor{gradcheck.Randn(4, 1, 5, 4), gradcheck.Randn(5, 1, 6, 4)},
		requires: []bool{true, true},
		params:   []int{0, 1},
		op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.AddPositionsAt(t, nn.Embedding(t, in[0], ids, 3, 2), in[1], 0)
		},
	})
}

// TestTiedEmbeddingAndOutputLayer: the word embedding table is also the
// output layer's weight (share_embeddings_and_output_weights). Both uses
// accumulate into the one Grad directly; the gradient is their sum and the
// table's hook runs once, after both.
func TestTiedEmbeddingAndOutputLayer(t *testing.T) {
	const v, h, s, b = 7, 4, 3, 2
	ids := []int32{6, 0, 3, 3, 1, 6}
	op := func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
		x := nn.Embedding(t, in[0], ids, s, b)
		x = nn.LayerNorm(t, x, in[1], in[2], 1e-5)
		return nn.Linear(t, x, in[0], nil) // logits [s, b, v]
	}
	inputs := []*tensor.Tensor{gradcheck.Randn(1, 1, v, h), gradcheck.Randn(2, 1, h), gradcheck.Randn(3, 1, h)}
	err := gradcheck.Check(gradcheck.Case{
		Inputs: inputs,
		Grad:   []bool{true, true, true},
		Op:     op,
		Ref: func(in [][]float64) []float64 {
			x := refLayerNorm(refEmbedding(in[0], ids, h), in[1], in[2], h, 1e-5)
			return refLinear(x, in[0], nil, v, h)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkDirectAccumulation(t, directCase{
		name: "tied embedding", inputs: inputs, requires: []bool{true, true, true}, params: []int{0, 1, 2}, op: op,
	})
}

// TestAddTokenPositionsGradcheck: per-token position ids (repeated, reset,
// different per batch row) add row ids[k] of the table to token k, and the
// table's gradient scatters back to those rows; its accumulation is
// direct; an id outside the table is an error naming the token.
func TestAddTokenPositionsGradcheck(t *testing.T) {
	const s, b, maxPos, h = 3, 2, 5, 4
	ids := []int32{0, 4, 1, 0, 2, 2} // sequence-first: token (i, j) at i·b + j
	err := gradcheck.Check(gradcheck.Case{
		Inputs: []*tensor.Tensor{gradcheck.Randn(21, 1, s, b, h), gradcheck.Randn(22, 1, maxPos, h)},
		Grad:   []bool{true, true},
		Op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.AddTokenPositions(t, in[0], in[1], ids)
		},
		Ref: func(in [][]float64) []float64 {
			out := append([]float64(nil), in[0]...)
			for k, id := range ids {
				for c := range h {
					out[k*h+c] += in[1][int(id)*h+c]
				}
			}
			return out
		},
		Seed: 23,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkDirectAccumulation(t, directCase{
		name:     "token positions",
		inputs:   []*tensor.Tensor{gradcheck.Randn(2, 1, s, b, h), gradcheck.Randn(3, 1, maxPos, h)},
		requires: []bool{true, true},
		params:   []int{1},
		op: func(t *autograd.Tape, in []*autograd.Var) *autograd.Var {
			return nn.AddTokenPositions(t, in[0], in[1], ids)
		},
	})
	bad := append([]int32(nil), ids...)
	bad[3] = maxPos
	tape := autograd.NewTape(context.Background())
	nn.AddTokenPositions(tape, autograd.Const(tensor.New(s, b, h)), autograd.NewLeaf(tensor.New(maxPos, h), "pos", true), bad)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "position id 5 of token (1, 1) exceeds max_position_embeddings 5") {
		t.Fatalf("err = %v", err)
	}
}
