package plan_test

import (
	"fmt"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/plan"
)

// The model state per rank of gotron bench's medium model (6 layers,
// hidden 512, 8192 tokens) on 2 and 4 data-parallel ranks under DDP, the
// distributed optimizer and Megatron-FSDP's sharded strategies, in
// float32: the numbers docs/MEMORY.md and docs/BENCHMARKS.md quote.
func ExampleMemory_fsdp() {
	m := config.DefaultTransformerConfig()
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads, m.SeqLength, m.VocabSize = 6, 512, 8, 512, 8192
	ddp := config.DefaultDDPConfig()
	for _, s := range []string{"ddp", "distopt", config.ShardOptimGrads, config.ShardOptimGradsParams} {
		d := ddp
		switch s {
		case "ddp":
		case "distopt":
			d.UseDistributedOptimizer = true
		default:
			d.UseMegatronFSDP, d.DataParallelShardingStrategy = true, s
			d.Finalize()
		}
		fmt.Printf("%-18s", s)
		for _, dp := range []int{2, 4} {
			n := plan.Memory(plan.Run{Model: m, DDP: d, MicroBatchSize: 4, GlobalBatchSize: 8 * dp}, dp, 1)
			fmt.Printf("  dp %d: %5.1f MB", dp, (n.Weights+n.Gradients+n.Optimizer)/1e6)
		}
		fmt.Println()
	}
	// Output:
	// ddp                 dp 2: 373.9 MB  dp 4: 373.9 MB
	// distopt             dp 2: 280.5 MB  dp 4: 233.7 MB
	// optim_grads         dp 2: 289.4 MB  dp 4: 219.3 MB
	// optim_grads_params  dp 2: 289.4 MB  dp 4: 200.3 MB
}
