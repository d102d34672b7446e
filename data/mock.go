package data

import (
	"fmt"
	"math"
)

// MockDataset is Megatron's --mock-data made reproducible across languages: every row is
// an arithmetic progression of tokens modulo the vocabulary, a pure function of the seed,
// the step's index, its global batch's size and the global row (docs/SEMANTICS.md § Mock
// data):
//
//	row_id = (Seed·1000003 + step)·rowsTotal + g                     (mod 2^64)
//	start  = Splitmix64(2·row_id) mod Vocab
//	stride = 1 + Splitmix64(2·row_id + 1) mod min(16, Vocab-1)
//	tok[t] = (start + t·stride) mod Vocab,  t = 0..Seq
//	input_ids = tok[0:Seq], labels = tok[1:Seq+1]
//
// The loss mask is all ones. A model can learn the rows (the next token follows from the
// previous two), so the loss falls, which makes the mock data a useful smoke test.
type MockDataset struct {
	Seed       uint64
	Vocab, Seq int
}

// Row returns the input ids and labels of global row g of step step's global batch of
// rowsTotal rows, each of length d.Seq.
//
// Row panics if d.Vocab is not in [2, 2^31) or d.Seq < 1: a validated config never
// produces those, so that is a bug in the caller.
func (d MockDataset) Row(step, rowsTotal, g int) (ids, labels []int32) {
	ids = make([]int32, d.Seq)
	labels = make([]int32, d.Seq)
	d.fillRow(step, rowsTotal, g, ids, labels)
	return ids, labels
}

// fillRow writes row g into ids and labels, each of length d.Seq.
func (d MockDataset) fillRow(step, rowsTotal, g int, ids, labels []int32) {
	if d.Vocab < 2 || d.Vocab > math.MaxInt32 || d.Seq < 1 {
		panic(fmt.Sprintf("data: MockDataset with Vocab=%d and Seq=%d: want 2 <= Vocab < 2^31 and Seq >= 1", d.Vocab, d.Seq))
	}
	vocab := uint64(d.Vocab)
	rowID := (d.Seed*1000003+uint64(step))*uint64(rowsTotal) + uint64(g)
	start := Splitmix64(2*rowID) % vocab
	stride := 1 + Splitmix64(2*rowID+1)%min(16, vocab-1)
	tok := start
	for t := 0; t < d.Seq; t++ {
		ids[t] = int32(tok)
		tok = (tok + stride) % vocab
		labels[t] = int32(tok)
	}
}

// Batch returns rows [row0, row0+rows) of the global batch of step (see [Dataset]),
// with a loss mask of ones.
func (d MockDataset) Batch(step Step, row0, rows int) Batch {
	checkRows(step, row0, rows)
	b := newBatch(rows, d.Seq)
	for r := 0; r < rows; r++ {
		s := r * d.Seq
		d.fillRow(step.Index, step.Rows, row0+r, b.InputIDs[s:s+d.Seq], b.Labels[s:s+d.Seq])
	}
	return b
}
