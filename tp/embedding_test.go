package tp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// embInit draws the whole master table from seed (the same on every rank).
func embInit(seed uint64) InitMethod {
	return func(m *tensor.Tensor) { rng.New(seed).FillNormal(m.Data(), 0, 0.02) }
}

// embIDs returns n ids in [0, v).
func embIDs(seed uint64, n, v int) []int32 {
	g := rng.New(seed)
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(g.Uint64n(uint64(v)))
	}
	return ids
}

func TestVocabParallelEmbeddingInit(t *testing.T) {
	const v, h = 16, 8
	master := tensor.New(v, h)
	embInit(3)(master)
	for _, ws := range []int{1, 2, 4} {
		runRanks(t, ws, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
			e, err := NewVocabParallelEmbedding("embedding.word_embeddings", v, h, g, embInit(3))
			if err != nil {
				return err
			}
			p := e.Weight
			r := g.Rank()
			if p.Name != "embedding.word_embeddings.weight" || !p.TensorModelParallel || p.PartitionDim != 0 || p.PartitionStride != 1 {
				return fmt.Errorf("weight %q: TensorModelParallel %v, PartitionDim %d, PartitionStride %d; want embedding.word_embeddings.weight, true, 0, 1",
					p.Name, p.TensorModelParallel, p.PartitionDim, p.PartitionStride)
			}
			if e.VocabStart != r*v/ws || e.VocabEnd != (r+1)*v/ws || e.NumEmbeddings != v || e.EmbeddingDim != h {
				return fmt.Errorf("rank %d: rows [%d, %d) of %d×%d, want [%d, %d) of %d×%d", r, e.VocabStart, e.VocabEnd, e.NumEmbeddings, e.EmbeddingDim, r*v/ws, (r+1)*v/ws, v, h)
			}
			if len(e.Parameters()) != 1 || e.Parameters()[0] != p {
				return fmt.Errorf("Parameters() = %v, want the weight", e.Parameters())
			}
			full, err := gatherFirst(ctx, g, p.Value, "test")
			if err != nil {
				return err
			}
			if r == 0 && !sameFloat32Bits(full.Data(), master.Data()) {
				return fmt.Errorf("%d ranks: the gathered weight differs from the master table", ws)
			}
			return nil
		})
	}
}

// serialEmbedding runs nn.Embedding on the whole table twice (forward and
// backward with dy each time, accumulating the gradient) and returns the
// output and the table's gradient.
func serialEmbedding(t *testing.T, table *tensor.Tensor, ids []int32, shape []int, dy *tensor.Tensor) (y, grad []float32) {
	t.Helper()
	tape := autograd.NewTape(context.Background())
	w := autograd.NewLeaf(table.Clone(), "table", true)
	for range 2 {
		out := nn.Embedding(tape, w, ids, shape...)
		if err := tape.Err(); err != nil {
			t.Fatal(err)
		}
		y = out.Value.Clone().Data()
		if err := autograd.Backward(tape, out, dy.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	return y, w.Grad.Data()
}

func TestVocabParallelEmbeddingMatchesSerial(t *testing.T) {
	const v, h, s, b = 16, 8, 8, 2
	master := tensor.New(v, h)
	embInit(5)(master)
	ids := embIDs(7, s*b, v)
	dy := randn(9, 1, s, b, h)
	wantY, wantGrad := serialEmbedding(t, master, ids, []int{s, b}, dy)
	for _, rs := range []bool{false, true} {
		for _, ws := range []int{1, 2, 4} {
			what := fmt.Sprintf("%d ranks, ReduceScatterEmbeddings %v", ws, rs)
			var (
				mu         sync.Mutex
				ys         = make([][]float32, ws)
				gotGrad    []float32
				gotShape   []int
				wantShapeS = s
			)
			if rs {
				wantShapeS = s / ws
			}
			runRanks(t, ws, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
				e, err := NewVocabParallelEmbedding("emb", v, h, g, embInit(5), WithReduceScatterEmbeddings(rs))
				if err != nil {
					return err
				}
				grad := dy
				if rs {
					grad = dy.Narrow(0, g.Rank()*s/ws, s/ws).Contiguous()
				}
				var y []float32
				for range 2 { // the gradient accumulates into Weight.Grad
					out, err := e.Forward(tape, ids, s, b)
					if err != nil {
						return err
					}
					y = out.Value.Clone().Data()
					if g.Rank() == 0 {
						mu.Lock()
						gotShape = out.Value.Shape()
						mu.Unlock()
					}
					if err := autograd.Backward(tape, out, grad.Clone()); err != nil {
						return err
					}
				}
				full, err := gatherFirst(ctx, g, e.Weight.Grad, "test")
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				ys[g.Rank()] = y
				if g.Rank() == 0 {
					gotGrad = full.Data()
				}
				return nil
			})
			if fmt.Sprint(gotShape) != fmt.Sprint([]int{wantShapeS, b, h}) {
				t.Fatalf("%s: output shape %v, want [%d %d %d]", what, gotShape, wantShapeS, b, h)
			}
			for r, y := range ys {
				want := wantY
				if rs {
					n := s / ws * b * h
					want = wantY[r*n : (r+1)*n]
				}
				numtest.SameBits(t, fmt.Sprintf("%s: rank %d output", what, r), y, want)
			}
			numtest.SameBits(t, what+": weight gradient", gotGrad, wantGrad)
		}
	}
}

func TestVocabParallelEmbeddingErrors(t *testing.T) {
	if _, err := NewVocabParallelEmbedding("emb", 16, 8, nil, nil); err == nil || !strings.Contains(err.Error(), "InitMethod is nil") {
		t.Errorf("nil init: error %v", err)
	}
	if _, err := NewVocabParallelEmbedding("emb", 0, 8, nil, embInit(1)); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("empty table: error %v", err)
	}
	runRanks(t, 4, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		if _, err := NewVocabParallelEmbedding("emb", 10, 8, g, embInit(1)); err == nil || !strings.Contains(err.Error(), "not a multiple of the tensor-parallel size") {
			return fmt.Errorf("vocabulary 10 over 4 ranks: error %v", err)
		}
		return nil
	})
	for _, c := range []struct {
		name  string
		rs    bool
		ids   []int32
		shape []int
		want  string
	}{
		{"negative id", false, []int32{1, -1, 2, 3}, nil, "id -1 at position 1 is outside the vocabulary [0, 16)"},
		{"id too large", false, []int32{1, 16, 2, 3}, []int{2, 2}, "id 16 at position 1 is outside the vocabulary [0, 16)"},
		{"shape", false, []int32{1, 2, 3}, []int{2, 2}, "3 ids for shape [2 2]"},
		{"sequence not divisible", true, []int32{1, 2, 3}, []int{3, 1}, "must be divisible by the tensor-parallel size 2"},
	} {
		runRanks(t, 2, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
			e, err := NewVocabParallelEmbedding("emb", 16, 8, g, embInit(1), WithReduceScatterEmbeddings(c.rs))
			if err != nil {
				return err
			}
			y, err := e.Forward(tape, c.ids, c.shape...)
			if err == nil || y != nil || !strings.Contains(err.Error(), c.want) {
				return fmt.Errorf("%s: Forward = %v, error %v; want an error containing %q", c.name, y, err, c.want)
			}
			return nil
		})
	}
}
