package mesh_test

import (
	"fmt"
	"os"

	"github.com/gotron/gotron/mesh"
)

// Sixteen ranks with tensor parallel 2 and pipeline parallel 2 leave data parallel 4
// (the worked example of Megatron's initialize_model_parallel).
func Example() {
	l, err := mesh.Build(mesh.Sizes{World: 16, TP: 2, PP: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("dp size:", l.Sizes().DP)
	fmt.Println("tp:", l.Groups(mesh.GroupTP)[:2])
	fmt.Println("dp:", l.Groups(mesh.GroupDP))
	fmt.Println("pp:", l.Groups(mesh.GroupPP)[:2])

	members, dpRank := l.GroupOf(mesh.GroupDP, 5)
	c, _ := l.Coords(5)
	next, _ := l.PipelineNextRank(5)
	fmt.Printf("rank 5: dp group %v at %d, coords tp %d dp %d pp %d, next stage %d\n", members, dpRank, c.TP, c.DP, c.PP, next)

	_, err = mesh.Build(mesh.Sizes{World: 6, TP: 2, PP: 2})
	fmt.Println(err)
	// Output:
	// dp size: 4
	// tp: [[0 1] [2 3]]
	// dp: [[0 2 4 6] [1 3 5 7] [8 10 12 14] [9 11 13 15]]
	// pp: [[0 8] [1 9]]
	// rank 5: dp group [1 3 5 7] at 2, coords tp 1 dp 2 pp 0, next stage 13
	// mesh: world size 6 is not divisible by tp·pp·cp = 2·2·1 = 4: use a world size that is a multiple of 4, or choose TP, PP and CP whose product divides 6
}

// A rank generator on its own: the docstring example of Megatron's
// generate_masked_orthogonal_rank_groups, tp 2, dp 3, pp 4 in order tp-dp-pp.
func ExampleRankGenerator_GetRanks() {
	g, err := mesh.NewRankGenerator(2, 1, 3, 4, 1, "tp-dp-pp", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(g.GetRanks("dp"))
	fmt.Println(g.Order())
	// Output:
	// [[0 2 4] [1 3 5] [6 8 10] [7 9 11] [12 14 16] [13 15 17] [18 20 22] [19 21 23]]
	// tp-dp-pp-ep-cp
}

func ExampleLayout_WriteTable() {
	l, _ := mesh.Build(mesh.Sizes{World: 4, TP: 2, PP: 2})
	l.WriteTable(os.Stdout)
	// Output:
	// world size 4, order tp-cp-ep-dp-pp
	// dense grid   tp 2 × cp 1 × dp 1 × pp 2
	// expert grid  etp 2 × ep 1 × edp 1 × pp 2
	// distributed-optimizer instances 1
	//
	// kind            grid    megatron                              size  count  groups
	// tp              dense   tp                                    2     2      [0 1] [2 3]
	// cp              dense   cp                                    1     4      [0] [1] [2] [3]
	// dp              dense   dp                                    1     4      [0] [1] [2] [3]
	// pp              dense   pp                                    2     2      [0 2] [1 3]
	// dp-cp           dense   dp_cp                                 1     4      [0] [1] [2] [3]
	// tp-cp           dense   tp_cp                                 2     2      [0 1] [2 3]
	// tp-dp           dense   get_tensor_and_data_parallel_group()  2     2      [0 1] [2 3]
	// tp-dp-cp        dense   tp_dp_cp                              2     2      [0 1] [2 3]
	// tp-pp           dense   mp                                    4     1      [0 1 2 3]
	// embd            dense   embd                                  2     2      [0 2] [1 3]
	// pos-embd        dense   pos_embd                              1     2      [0] [1]
	// intra-dp-cp     dense   intra_dp_cp                           1     4      [0] [1] [2] [3]
	// expt-tp         expert  expt_tp                               2     2      [0 1] [2 3]
	// ep              expert  ep                                    1     4      [0] [1] [2] [3]
	// expt-dp         expert  expt_dp                               1     4      [0] [1] [2] [3]
	// tp-ep           expert  tp_ep                                 2     2      [0 1] [2 3]
	// tp-ep-pp        expert  tp_ep_pp                              4     1      [0 1 2 3]
	// intra-expt-dp   expert  intra_expt_dp                         1     4      [0] [1] [2] [3]
	// intra-dist-opt  expert  intra_dist_opt                        4     1      [0 1 2 3]
}
