package config_test

import (
	"fmt"

	"github.com/gotron/gotron/config"
)

// A configuration is built from the reference's defaults, finalized, and
// validated once; every violated rule is reported at once.
func Example() {
	mp := config.DefaultModelParallelConfig()
	mp.TensorModelParallelSize = 2
	mp.PipelineModelParallelSize = 4
	mp.VirtualPipelineModelParallelSize = 2
	mp.SequenceParallel = true
	mp.Finalize()

	ddp := config.DefaultDDPConfig()
	ddp.UseDistributedOptimizer = true
	ddp.OverlapGradReduce = true

	if err := config.ValidateTogether(mp, ddp, false); err != nil {
		fmt.Println(err) // pipeline_dtype is missing
	}
	mp.PipelineDType = config.Float32
	if err := config.ValidateTogether(mp, ddp, false); err != nil {
		fmt.Println(err)
	}

	dp, err := mp.DataParallelSize(16)
	fmt.Println("dp:", dp, err)
	fmt.Println("bucket size:", ddp.EffectiveBucketSize(dp*mp.ContextParallelSize))
	fmt.Println(config.ValidateWorld(12, mp, ddp))
	// Output:
	// config: 1 invalid setting:
	//   - pipeline_model_parallel_size = 4 needs pipeline_dtype, the element type of pipeline messages: set pipeline_dtype (usually to params_dtype, here float32)
	// dp: 2 <nil>
	// bucket size: 40000000
	// config: 2 invalid settings:
	//   - world_size 12 is not divisible by tensor_model_parallel_size·pipeline_model_parallel_size·context_parallel_size = 2·4·1 = 8 (12 mod 8 = 4): use a multiple of 8 ranks or change the sizes
	//   - world_size 12 is not divisible by expert_tensor_parallel_size·expert_model_parallel_size·pipeline_model_parallel_size = 2·1·4 = 8 (12 mod 8 = 4): use a multiple of 8 ranks or change the expert sizes (--expert-tensor-parallel-size, --expert-model-parallel-size)
}
