package cp_test

import (
	"fmt"

	"github.com/gotron/gotron/cp"
)

// A sequence of 8 tokens over 2 context-parallel ranks: 4 chunks of 2,
// rank 0 holding the first and the last, rank 1 the two middle ones; each
// rank's causal attention work is the same.
func ExampleSplit() {
	ids := []int32{10, 11, 12, 13, 14, 15, 16, 17}
	for r := range 2 {
		fmt.Println("rank", r, cp.Split(ids, 1, 8, 2, r), "positions", cp.Positions(8, 2, r), "work", cp.Work(8, 2, r, false))
	}
	// Output:
	// rank 0 [10 11 16 17] positions [0 1 6 7] work 18
	// rank 1 [12 13 14 15] positions [2 3 4 5] work 18
}
