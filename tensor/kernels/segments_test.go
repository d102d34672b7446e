package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// TestSegmentMask: on random blocks (offsets from no live entry to no
// causal mask, ids from {0, 1, 2}, a row stride wider than the block),
// exactly the live entries j < i + offset + 1 whose ids differ become −Inf;
// everything else, masked columns and the stride's padding included, keeps
// its value. SegmentsMeet is false only for blocks with no live entry of
// equal ids.
func TestSegmentMask(t *testing.T) {
	g := rng.New(3)
	inf := float32(math.Inf(-1))
	for trial := range 200 {
		m, n := 1+int(g.Uint64n(9)), 1+int(g.Uint64n(9))
		ld := n + int(g.Uint64n(3))
		off := int(g.Uint64n(uint64(m+n+2))) - m - 1
		qseg, kseg := make([]int32, m), make([]int32, n)
		for i := range qseg {
			qseg[i] = int32(g.Uint64n(3))
		}
		for j := range kseg {
			kseg[j] = int32(g.Uint64n(3)) + int32(trial%3) // shifted: some blocks share no id
		}
		p := normal(g, (m-1)*ld+n, 0, 1)
		before := clone(p)
		SegmentMask(p, ld, m, n, off, qseg, kseg)
		meet := false
		for i := range m {
			for j := range ld {
				if i*ld+j >= len(p) {
					break
				}
				live := j < n && j <= i+off
				want := before[i*ld+j]
				if live && qseg[i] != kseg[j] {
					want = inf
				}
				meet = meet || live && qseg[i] == kseg[j]
				if p[i*ld+j] != want {
					t.Fatalf("trial %d (m %d, n %d, ld %d, offset %d): p[%d,%d] = %g, want %g", trial, m, n, ld, off, i, j, p[i*ld+j], want)
				}
			}
		}
		if meet && !SegmentsMeet(m, n, off, qseg, kseg) {
			t.Fatalf("trial %d: SegmentsMeet is false for a block with a live pair of equal ids (q %v, k %v, offset %d)", trial, qseg, kseg, off)
		}
	}
	if SegmentsMeet(2, 2, 5, []int32{3, 4}, []int32{1, 2}) || SegmentsMeet(2, 2, -2, []int32{1, 1}, []int32{1, 1}) {
		t.Error("SegmentsMeet: true for keys all in earlier segments, or for a block with no live entry")
	}
}

// TestBlockSoftmaxMaskedRow: a row whose live scores are all −Inf (masked
// by segments) gets lse −Inf and zero probabilities, as a row with no live
// column; a row with a +Inf score still gives NaN.
func TestBlockSoftmaxMaskedRow(t *testing.T) {
	inf := float32(math.Inf(-1))
	p := []float32{inf, inf, 5, 1, 2, 3, float32(math.Inf(1)), 0, 0}
	lse := make([]float32, 3)
	BlockSoftmaxForward(p, 3, 3, 3, 1, 1, lse)
	if !math.IsInf(float64(lse[0]), -1) || p[0] != 0 || p[1] != 0 || p[2] != 0 {
		t.Errorf("masked row: lse %g, p %v; want −Inf and zeros", lse[0], p[:3])
	}
	if e := math.Abs(float64(lse[1]) - math.Log(math.Exp(1)+math.Exp(2)+math.Exp(3))); e > 1e-6 || p[5] <= p[4] {
		t.Errorf("live row: lse %g, p %v", lse[1], p[3:6])
	}
	if p[6] == p[6] {
		t.Errorf("row with a +Inf score: p = %v, want NaN", p[6:])
	}
}
