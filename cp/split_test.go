package cp_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gotron/gotron/cp"
)

// TestSplitMatchesMegatron: cp = 2 over positions 0…7 gives rank 0
// [0 1 6 7] and rank 1 [2 3 4 5] (docs/SEMANTICS.md § Context-parallel batch
// split); Split, Positions and Gather agree for several rows and sizes.
func TestSplitMatchesMegatron(t *testing.T) {
	seq := []int{0, 1, 2, 3, 4, 5, 6, 7}
	if got := cp.Split(seq, 1, 8, 2, 0); !slices.Equal(got, []int{0, 1, 6, 7}) {
		t.Fatalf("rank 0: %v", got)
	}
	if got := cp.Split(seq, 1, 8, 2, 1); !slices.Equal(got, []int{2, 3, 4, 5}) {
		t.Fatalf("rank 1: %v", got)
	}
	for _, n := range []int{1, 2, 3, 4} {
		const b, s = 3, 48
		x := make([]int, b*s)
		for i := range x {
			x[i] = i
		}
		parts := make([][]int, n)
		for r := range n {
			parts[r] = cp.Split(x, b, s, n, r)
			for j := range b {
				for i, p := range cp.Positions(s, n, r) {
					if n > 1 && parts[r][j*s/n+i] != j*s+p {
						t.Fatalf("cp %d rank %d row %d: element %d is %d, want position %d", n, r, j, i, parts[r][j*s/n+i], p)
					}
				}
			}
		}
		if got := cp.Gather(parts, b, s); !slices.Equal(got, x) {
			t.Fatalf("cp %d: Gather(Split) is not the identity", n)
		}
	}
}

// TestZigzagBalancesWork counts each rank's causal attention work: with
// the zigzag split the ranks are within 5% of each other (exactly equal),
// while a contiguous split leaves the last rank about 2·cp−1 times the
// first's.
func TestZigzagBalancesWork(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		for _, s := range []int{4096, 8 * 2 * 65} {
			if s%(2*n) != 0 {
				continue
			}
			t.Run(fmt.Sprintf("cp%d/s%d", n, s), func(t *testing.T) {
				var zig, plain []int64
				var total int64
				for r := range n {
					zig = append(zig, cp.Work(s, n, r, false))
					plain = append(plain, cp.Work(s, n, r, true))
					total += zig[r]
				}
				if want := int64(s) * int64(s+1) / 2; total != want {
					t.Fatalf("the ranks compute %d score pairs, the causal square has %d", total, want)
				}
				if lo, hi := slices.Min(zig), slices.Max(zig); float64(hi) > 1.05*float64(lo) {
					t.Errorf("zigzag: work %v, max/min %.3f > 1.05", zig, float64(hi)/float64(lo))
				}
				lo, hi := slices.Min(plain), slices.Max(plain)
				if r := float64(hi) / float64(lo); r < 0.95*float64(2*n-1) {
					t.Errorf("contiguous: work %v, max/min %.2f, expected about 2·cp−1 = %d", plain, r, 2*n-1)
				}
				t.Logf("zigzag %v; contiguous %v (max/min %.1f)", zig, plain, float64(hi)/float64(lo))
			})
		}
	}
}
