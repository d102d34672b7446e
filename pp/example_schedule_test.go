package pp_test

import (
	"fmt"

	"github.com/gotron/gotron/pp"
)

// Build every rank's 1F1B schedule for two stages and three microbatches,
// check that the ranks' lists complete against each other, and draw them.
func ExampleBuildAll() {
	ss, err := pp.BuildAll(pp.Config{PP: 2, Microbatches: 3})
	if err != nil {
		panic(err)
	}
	res, err := pp.Verify(ss)
	if err != nil {
		panic(err)
	}
	fmt.Print(pp.FormatGrid(ss))
	fmt.Println("peak live activations per rank:", res.PeakLive)
	fmt.Println("rank 0's order:", ss[0].Order)
	// Output:
	// forward_backward_pipelining_without_interleaving: pp 2, vpp 1, 3 microbatches, group size 2
	// rank 0 (W 1, R 2) | nosync F0    [sn0] F1 [sn1 rn0] B0 F2 [sn2 rn1] B1 sync [rn2] B2
	// rank 1 (W 0, R 3) | nosync [rp0] F0    B0 [sp0 rp1] F1 B1 [sp1 rp2] F2 sync B2    [sp2]
	// legend: F/B m.c compute; [ ] blocking and { } async comm of sn send_next, rp recv_prev, sp send_prev, rn recv_next; w: wait; nosync/sync enter/leave no_sync; gs/ps grad/param sync of a chunk
	// peak live activations per rank: [2 1]
	// rank 0's order: [1 1 -1 1 -1 -1]
}

// The interleaved schedule's table and order for the reference's docstring
// example: two stages, two chunks, five microbatches in groups of three.
func ExampleConvertScheduleTableToOrder() {
	table := pp.GetScheduleTable(5, 2, 3)
	_, warmup, _, _ := pp.GetPPRankMicrobatches(5, 2, 3, 2, 0, true, false)
	fmt.Println(warmup, pp.ConvertScheduleTableToOrder(warmup, 2, table))
	// Output:
	// 5 [1 1 1 2 2 2 -2 1 -2 1 -2 2 -1 2 -1 -1 -2 -2 -1 -1]
}
