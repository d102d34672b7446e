package tp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/tensor"
)

func TestDivide(t *testing.T) {
	if q, err := Divide(12, 4); err != nil || q != 3 {
		t.Fatalf("Divide(12, 4) = %d, %v; want 3, nil", q, err)
	}
	for _, c := range [][2]int{{10, 4}, {3, 0}} {
		_, err := Divide(c[0], c[1])
		want := fmt.Sprintf("%d is not divisible by %d", c[0], c[1])
		if err == nil || err.Error() != want {
			t.Fatalf("Divide(%d, %d) error %v, want %q", c[0], c[1], err, want)
		}
	}
}

func TestVocabRange(t *testing.T) {
	for r := 0; r < 8; r++ {
		s, e, err := VocabRangeFromGlobalVocabSize(1600, r, 8)
		if err != nil || s != 200*r || e != 200*r+200 {
			t.Fatalf("rank %d: [%d, %d), %v; want [%d, %d)", r, s, e, err, 200*r, 200*r+200)
		}
		if s2, e2 := VocabRangeFromPerPartitionVocabSize(200, r, 8); s2 != s || e2 != e {
			t.Fatalf("rank %d: per-partition range [%d, %d), want [%d, %d)", r, s2, e2, s, e)
		}
	}
	// The ranges tile [0, V) for every size that divides V.
	for _, ws := range []int{1, 2, 4} {
		next := 0
		for r := 0; r < ws; r++ {
			s, e, err := VocabRangeFromGlobalVocabSize(12, r, ws)
			if err != nil || s != next || e-s != 12/ws {
				t.Fatalf("ws %d rank %d: [%d, %d), %v", ws, r, s, e, err)
			}
			next = e
		}
	}
	_, _, err := VocabRangeFromGlobalVocabSize(1601, 0, 8)
	if err == nil || !strings.Contains(err.Error(), "1601 is not divisible by 8") {
		t.Fatalf("V=1601 ws=8: error %v, want one saying 1601 is not divisible by 8", err)
	}
}

func TestSplitTensorAlongLastDim(t *testing.T) {
	x := randn(5, 1, 2, 3, 6)
	for _, contiguous := range []bool{false, true} {
		parts, err := SplitTensorAlongLastDim(x, 3, contiguous)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != 3 {
			t.Fatalf("%d parts, want 3", len(parts))
		}
		for i, p := range parts {
			sameTensorBits(t, fmt.Sprintf("contiguous=%v part %d", contiguous, i), p, x.Narrow(2, 2*i, 2).Clone())
			if contiguous != !sharesStorage(p, x) {
				t.Fatalf("contiguous=%v part %d: shares storage with x = %v", contiguous, i, sharesStorage(p, x))
			}
			if contiguous && !p.IsContiguous() {
				t.Fatalf("part %d is not contiguous", i)
			}
		}
		sameTensorBits(t, "parts concatenated", tensor.Cat(-1, parts...), x)
	}
	_, err := SplitTensorAlongLastDim(x, 4, false)
	if err == nil || !strings.Contains(err.Error(), "6 is not divisible by 4") {
		t.Fatalf("split of 6 into 4: error %v, want one saying 6 is not divisible by 4", err)
	}
	if _, err := SplitTensorAlongLastDim(x, 0, false); err == nil {
		t.Fatal("split into 0 partitions: no error")
	}
}

// sharesStorage reports whether writing p's first element changes x.
func sharesStorage(p, x *tensor.Tensor) bool {
	old := x.Clone()
	idx := make([]int, p.Rank())
	v := p.At(idx...)
	p.Set(v+1, idx...)
	changed := false
	for i, a := range x.Clone().Data() {
		if a != old.Data()[i] {
			changed = true
		}
	}
	p.Set(v, idx...)
	return changed
}

func TestSplitTensorInto1DEqualChunks(t *testing.T) {
	for _, n := range mappingRanks {
		x := randn(6, 1, 2, 5) // 10 elements: chunks of ⌊10/n⌋
		c := 10 / n
		chunks := make([][2]*tensor.Tensor, n)
		runRanks(t, n, func(ctx context.Context, g comm.Group, _ *autograd.Tape) error {
			mine := x.Clone()
			view := SplitTensorInto1DEqualChunks(mine, g, false)
			fresh := SplitTensorInto1DEqualChunks(mine, g, true)
			chunks[g.Rank()] = [2]*tensor.Tensor{view, fresh}
			if !sharesStorage(view, mine) || sharesStorage(fresh, mine) {
				return fmt.Errorf("rank %d: the view does not share storage, or the new buffer does", g.Rank())
			}
			return nil
		})
		for r, ch := range chunks {
			want := tensor.FromSlice(x.Data()[r*c:(r+1)*c], c)
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d view", n, r), ch[0], want)
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d new buffer", n, r), ch[1], want)
		}
	}
	// A strided tensor needs newBuffer.
	xt := randn(7, 1, 3, 4).Transpose(0, 1)
	sameTensorBits(t, "strided, new buffer", SplitTensorInto1DEqualChunks(xt, nil, true), xt.Clone().View(12))
	defer func() {
		if recover() == nil {
			t.Fatal("view of a strided tensor did not panic")
		}
	}()
	SplitTensorInto1DEqualChunks(xt, nil, false)
}

func TestGatherSplit1DTensor(t *testing.T) {
	for _, n := range mappingRanks {
		x := randn(8, 1, 4, 6) // 24 elements: divisible by 1, 2, 4
		got := make([]*tensor.Tensor, n)
		runRanks(t, n, func(ctx context.Context, g comm.Group, _ *autograd.Tape) error {
			part := SplitTensorInto1DEqualChunks(x.Clone(), g, true)
			y, err := GatherSplit1DTensor(ctx, part, g)
			got[g.Rank()] = y
			return err
		})
		for r, y := range got {
			sameTensorBits(t, fmt.Sprintf("n=%d rank %d", n, r), y, x.Clone().View(24))
		}
	}
}
