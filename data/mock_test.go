package data

import (
	"reflect"
	"testing"
)

// refMockRow computes a mock row from the formula of docs/SEMANTICS.md § Mock data on the
// reference splitmix64, with t·stride computed by multiplication rather than by repeated
// addition.
func refMockRow(seed uint64, vocab, seq, step, rowsTotal, g int) (ids, labels []int32) {
	rowID := (seed*1000003+uint64(step))*uint64(rowsTotal) + uint64(g)
	v := uint64(vocab)
	start := refSplitmix64(2*rowID) % v
	m := uint64(16)
	if v-1 < m {
		m = v - 1
	}
	stride := 1 + refSplitmix64(2*rowID+1)%m
	tok := make([]int32, seq+1)
	for t := range tok {
		tok[t] = int32((start + uint64(t)*stride) % v)
	}
	return tok[:seq], tok[1:]
}

func TestMockRowKnownValue(t *testing.T) {
	// Seed 1234, vocab 50, seq 6, step 3, 4 rows, row 2, recomputed with Python integers:
	// start 20, stride 13.
	d := MockDataset{Seed: 1234, Vocab: 50, Seq: 6}
	ids, labels := d.Row(3, 4, 2)
	if want := []int32{20, 33, 46, 9, 22, 35}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if want := []int32{33, 46, 9, 22, 35, 48}; !reflect.DeepEqual(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
}

func TestMockAgainstReference(t *testing.T) {
	for _, d := range []MockDataset{{0, 2, 5}, {1, 3, 4}, {7, 17, 9}, {1234, 50257, 33}, {^uint64(0), 1 << 20, 3}} {
		for step := 0; step < 4; step++ {
			for g := 0; g < 5; g++ {
				ids, labels := d.Row(step, 5, g)
				wi, wl := refMockRow(d.Seed, d.Vocab, d.Seq, step, 5, g)
				if !reflect.DeepEqual(ids, wi) || !reflect.DeepEqual(labels, wl) {
					t.Fatalf("%+v step %d row %d: got %v/%v, want %v/%v", d, step, g, ids, labels, wi, wl)
				}
			}
		}
	}
}

func TestMockBatch(t *testing.T) {
	d := MockDataset{Seed: 5, Vocab: 100, Seq: 8}
	b := d.Batch(ConstantStep(2, 6), 1, 3)
	if b.Rows != 3 || b.Seq != 8 || len(b.InputIDs) != 24 || len(b.Labels) != 24 || len(b.LossMask) != 24 {
		t.Fatalf("batch %d×%d with %d/%d/%d entries", b.Rows, b.Seq, len(b.InputIDs), len(b.Labels), len(b.LossMask))
	}
	for r := 0; r < 3; r++ {
		wi, wl := refMockRow(5, 100, 8, 2, 6, 1+r)
		if !reflect.DeepEqual(b.InputIDs[8*r:8*r+8], wi) || !reflect.DeepEqual(b.Labels[8*r:8*r+8], wl) {
			t.Errorf("row %d differs from the reference", r)
		}
	}
	for i, m := range b.LossMask {
		if m != 1 {
			t.Fatalf("loss mask[%d] = %v", i, m)
		}
	}
}

// checkSplitInvariance checks that asking for the global batch in any row split gives the
// same rows.
func checkSplitInvariance(t *testing.T, d Dataset, step, rowsTotal int) {
	t.Helper()
	whole := d.Batch(ConstantStep(step, rowsTotal), 0, rowsTotal)
	for _, per := range []int{1, 2, 3} {
		if rowsTotal%per != 0 {
			continue
		}
		var ids, labels []int32
		var mask []float32
		for r0 := 0; r0 < rowsTotal; r0 += per {
			b := d.Batch(ConstantStep(step, rowsTotal), r0, per)
			ids = append(ids, b.InputIDs...)
			labels = append(labels, b.Labels...)
			mask = append(mask, b.LossMask...)
		}
		if !reflect.DeepEqual(ids, whole.InputIDs) || !reflect.DeepEqual(labels, whole.Labels) || !reflect.DeepEqual(mask, whole.LossMask) {
			t.Errorf("step %d: rows fetched %d at a time differ from the whole batch", step, per)
		}
	}
}

func TestMockSplitInvariance(t *testing.T) {
	d := MockDataset{Seed: 9, Vocab: 64, Seq: 5}
	for step := 0; step < 3; step++ {
		checkSplitInvariance(t, d, step, 6)
	}
	// Rows 0..3 at once equal rows 0..1 then 2..3.
	all := d.Batch(ConstantStep(4, 4), 0, 4)
	a, b := d.Batch(ConstantStep(4, 4), 0, 2), d.Batch(ConstantStep(4, 4), 2, 2)
	if !reflect.DeepEqual(all.InputIDs, append(a.InputIDs, b.InputIDs...)) {
		t.Error("rows 0..3 differ from rows 0..1 + 2..3")
	}
}

func TestBatchPanicsOnBadRows(t *testing.T) {
	d := MockDataset{Seed: 1, Vocab: 10, Seq: 2}
	for _, c := range [][4]int{{0, 4, 3, 2}, {0, 4, -1, 1}, {-1, 4, 0, 1}, {0, 4, 0, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Batch%v did not panic", c)
				}
			}()
			d.Batch(ConstantStep(c[0], c[1]), c[2], c[3])
		}()
	}
	defer func() {
		if recover() == nil {
			t.Error("Row with vocab 1 did not panic")
		}
	}()
	MockDataset{Vocab: 1, Seq: 2}.Row(0, 1, 0)
}
