package config

import "testing"

type ddpCase = ruleCase[DDPConfig]

func runDDPCases(t *testing.T, cases []ddpCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultDDPConfig()
			tc.change(&c)
			checkViolations(t, c.Violations(), tc.want, tc.msg)
			if err := c.Validate(); (err == nil) != (len(tc.want) == 0) {
				t.Fatalf("Validate() = %v, want %d violations", err, len(tc.want))
			}
		})
	}
}

// TestDDPReferenceRules covers docs/SEMANTICS.md
// § DistributedDataParallelConfig checks: the __post_init__ rules, the DDP
// wrapper's and buffers' asserts, and the training layer's
// overlap_param_gather rules.
func TestDDPReferenceRules(t *testing.T) {
	runDDPCases(t, []ddpCase{
		{"rule 1: megatron_fsdp_version not 1 or 2",
			func(c *DDPConfig) { c.MegatronFSDPVersion = 3 },
			[][]string{{"megatron_fsdp_version"}}, []string{"= 3", "either 1 or 2"}},
		{"rule 2: reuse grad buffer without fp8 param gather",
			func(c *DDPConfig) { c.ReuseGradBufForMXFP8ParamAG = true },
			[][]string{{"reuse_grad_buf_for_mxfp8_param_ag", "fp8_param_gather"}, {"reuse_grad_buf_for_mxfp8_param_ag"}},
			[]string{"fp8_param_gather = true"}},
		{"rule 4: fp32 local accumulation patterns with grad_reduce_in_fp32",
			func(c *DDPConfig) {
				c.ParamNamePatternsForFP32LocalAccumulation = []string{"*.weight", "all"}
				c.GradReduceInFP32 = true
			},
			[][]string{{"param_name_patterns_for_fp32_local_accumulation", "grad_reduce_in_fp32"}},
			[]string{"2 pattern(s)"}},
		{"rule 4: patterns without grad_reduce_in_fp32 are valid",
			func(c *DDPConfig) { c.ParamNamePatternsForFP32LocalAccumulation = []string{"all"} }, nil, nil},
		{"rule 5: num_buckets with bucket_size",
			func(c *DDPConfig) { c.NumBuckets, c.BucketSize = 4, 1000 },
			[][]string{{"num_buckets", "bucket_size"}}, []string{"num_buckets = 4", "bucket_size = 1000", "only one"}},
		{"rule 5: num_buckets not positive",
			func(c *DDPConfig) { c.NumBuckets = -2 },
			[][]string{{"num_buckets"}}, []string{"= -2", "greater than 0"}},
		{"bucket_size not positive",
			func(c *DDPConfig) { c.BucketSize = -1 },
			[][]string{{"bucket_size"}}, []string{"= -1"}},
		{"instances below 1",
			func(c *DDPConfig) { c.NumDistributedOptimizerInstances = 0 },
			[][]string{{"num_distributed_optimizer_instances"}}, []string{"= 0"}},
		{"partial DistOpt without DistOpt",
			func(c *DDPConfig) { c.NumDistributedOptimizerInstances = 2 },
			[][]string{{"num_distributed_optimizer_instances", "use_distributed_optimizer"}},
			[]string{"= 2", "use_distributed_optimizer = true"}},
		{"partial DistOpt with DistOpt is valid",
			func(c *DDPConfig) { c.NumDistributedOptimizerInstances, c.UseDistributedOptimizer = 2, true }, nil, nil},
		{"fp32-accumulating reduce-scatter with partial DistOpt",
			func(c *DDPConfig) {
				c.ReduceScatterWithFP32Accumulation = true
				c.NumDistributedOptimizerInstances, c.UseDistributedOptimizer = 2, true
			},
			[][]string{{"reduce_scatter_with_fp32_accumulation", "num_distributed_optimizer_instances"}},
			[]string{"= 2 > 1"}},
		{"fp32-accumulating reduce-scatter averaging in the collective",
			func(c *DDPConfig) { c.ReduceScatterWithFP32Accumulation, c.AverageInCollective = true, true },
			[][]string{{"reduce_scatter_with_fp32_accumulation", "average_in_collective"}},
			[]string{"only ReduceOp SUM"}},
		{"overlap_param_gather without DistOpt",
			func(c *DDPConfig) { c.OverlapParamGather, c.OverlapGradReduce = true, true },
			[][]string{{"overlap_param_gather", "use_distributed_optimizer"}}, nil},
		{"overlap_param_gather without overlap_grad_reduce",
			func(c *DDPConfig) { c.OverlapParamGather, c.UseDistributedOptimizer = true, true },
			[][]string{{"overlap_param_gather", "overlap_grad_reduce"}}, nil},
		{"overlap_param_gather, fully set up, is valid",
			func(c *DDPConfig) {
				c.OverlapParamGather, c.UseDistributedOptimizer, c.OverlapGradReduce = true, true, true
			}, nil, nil},
		{"gradient_reduce_div_fusion off is an accepted no-op",
			func(c *DDPConfig) { c.GradientReduceDivFusion = false }, nil, nil},
	})
}

func TestDDPNotProvided(t *testing.T) {
	changes := map[string]func(*DDPConfig){
		"fp8_param_gather":         func(c *DDPConfig) { c.FP8ParamGather = true },
		"fp4_param_gather":         func(c *DDPConfig) { c.FP4ParamGather = true },
		"megatron_fsdp_version":    func(c *DDPConfig) { c.MegatronFSDPVersion = 2 },
		"keep_fp8_transpose_cache": func(c *DDPConfig) { c.KeepFP8TransposeCache = true },
		"nccl_ub":                  func(c *DDPConfig) { c.NCCLUB = true },
		"fsdp_double_buffer":       func(c *DDPConfig) { c.FSDPDoubleBuffer = true },
		"fsdp_db_use_persist_buf_on_alloc_fail": func(c *DDPConfig) {
			c.FSDPDBUsePersistBufOnAllocFail = true
		},
		"fsdp_all_gather_in_start_param_sync":  func(c *DDPConfig) { c.FSDPAllGatherInStartParamSync = false },
		"disable_symmetric_registration":       func(c *DDPConfig) { c.DisableSymmetricRegistration = true },
		"fsdp_manual_registration":             func(c *DDPConfig) { c.FSDPManualRegistration = true },
		"delay_wgrad_compute":                  func(c *DDPConfig) { c.DelayWgradCompute = true },
		"megatron_fsdp_main_params_dtype":      func(c *DDPConfig) { c.MegatronFSDPMainParamsDType = BFloat16 },
		"megatron_fsdp_main_grads_dtype":       func(c *DDPConfig) { c.MegatronFSDPMainGradsDType = Float32 },
		"megatron_fsdp_grad_comm_dtype":        func(c *DDPConfig) { c.MegatronFSDPGradCommDType = BFloat16 },
		"megatron_fsdp_use_decoupled_grad":     func(c *DDPConfig) { c.MegatronFSDPUseDecoupledGrad = true },
		"megatron_fsdp_cuda_graph_mode":        func(c *DDPConfig) { c.MegatronFSDPCUDAGraphMode = true },
		"megatron_fsdp_max_pool_double_buffer": func(c *DDPConfig) { c.MegatronFSDPMaxPoolDoubleBuffer = true },
		"megatron_fsdp_enable_fine_grained_param_gather": func(c *DDPConfig) {
			c.MegatronFSDPEnableFineGrainedParamGather = true
		},
	}
	var cases []ddpCase
	for name, change := range changes {
		cases = append(cases, ddpCase{name, change, [][]string{{name}}, []string{"CPU backend does not provide"}})
	}
	// reuse_grad_buf_for_mxfp8_param_ag with its required fp8_param_gather.
	cases = append(cases, ddpCase{"reuse_grad_buf_for_mxfp8_param_ag",
		func(c *DDPConfig) { c.ReuseGradBufForMXFP8ParamAG, c.FP8ParamGather = true, true },
		[][]string{{"reuse_grad_buf_for_mxfp8_param_ag"}, {"fp8_param_gather"}},
		[]string{"CPU backend does not provide"}})
	runDDPCases(t, cases)
}

// TestDDPFSDPRules covers Megatron-FSDP's settings: the strategies, what
// needs use_megatron_fsdp, the reference's hybrid rule, and Finalize's
// implications.
func TestDDPFSDPRules(t *testing.T) {
	fsdp := func(s string) func(*DDPConfig) {
		return func(c *DDPConfig) { c.UseMegatronFSDP, c.DataParallelShardingStrategy = true, s }
	}
	runDDPCases(t, []ddpCase{
		{"every strategy is valid with FSDP: optim_grads_params", fsdp(ShardOptimGradsParams), nil, nil},
		{"optim_grads", fsdp(ShardOptimGrads), nil, nil},
		{"optim", fsdp(ShardOptim), nil, nil},
		{"no_shard", fsdp(NoShard), nil, nil},
		{"the deprecated name", func(c *DDPConfig) { c.UseCustomFSDP, c.DataParallelShardingStrategy = true, ShardOptimGrads }, nil, nil},
		{"an unknown strategy", fsdp("zero3"),
			[][]string{{"data_parallel_sharding_strategy"}}, []string{`"zero3"`, "optim_grads_params"}},
		{"a strategy without FSDP",
			func(c *DDPConfig) { c.DataParallelShardingStrategy = ShardOptimGrads },
			[][]string{{"data_parallel_sharding_strategy", "use_megatron_fsdp"}}, []string{"--use-megatron-fsdp"}},
		{"an unknown outer strategy",
			func(c *DDPConfig) { fsdp(ShardOptimGradsParams)(c); c.OuterDPShardingStrategy = "optim_grads" },
			[][]string{{"outer_dp_sharding_strategy"}}, []string{`"optim_grads"`}},
		{"an outer strategy without ZeRO-3 inside",
			func(c *DDPConfig) {
				fsdp(ShardOptimGrads)(c)
				c.OuterDPShardingStrategy, c.UseDistributedOptimizer, c.NumDistributedOptimizerInstances = ShardOptim, true, 2
			},
			[][]string{{"outer_dp_sharding_strategy", "data_parallel_sharding_strategy"}},
			[]string{"reference's rule"}},
		{"an outer strategy without instances",
			func(c *DDPConfig) { fsdp(ShardOptimGradsParams)(c); c.OuterDPShardingStrategy = ShardOptim },
			[][]string{{"outer_dp_sharding_strategy", "num_distributed_optimizer_instances"}}, []string{"2 or more"}},
		{"HFSDP is valid",
			func(c *DDPConfig) {
				fsdp(ShardOptimGradsParams)(c)
				c.OuterDPShardingStrategy, c.UseDistributedOptimizer, c.NumDistributedOptimizerInstances = ShardOptim, true, 2
			}, nil, nil},
		{"a negative unit",
			func(c *DDPConfig) { fsdp(ShardOptimGradsParams)(c); c.SuggestedCommunicationUnitSize = -1 },
			[][]string{{"suggested_communication_unit_size"}}, []string{"= -1"}},
		{"a unit without FSDP",
			func(c *DDPConfig) { c.SuggestedCommunicationUnitSize = 1 << 20 },
			[][]string{{"suggested_communication_unit_size", "data_parallel_sharding_strategy"}}, []string{"1048576"}},
		{"a unit with FSDP's optim strategy, which has no units",
			func(c *DDPConfig) { fsdp(ShardOptim)(c); c.SuggestedCommunicationUnitSize = 1 << 20 },
			[][]string{{"suggested_communication_unit_size", "data_parallel_sharding_strategy"}}, []string{`"optim"`}},
		{"hybrid sharding (HSDP) is valid",
			func(c *DDPConfig) {
				fsdp(ShardOptimGradsParams)(c)
				c.UseDistributedOptimizer, c.NumDistributedOptimizerInstances = true, 2
			}, nil, nil},
		{"a unit with FSDP is valid",
			func(c *DDPConfig) { fsdp(ShardOptimGradsParams)(c); c.SuggestedCommunicationUnitSize = 1 << 20 }, nil, nil},
		{"fp32-accumulating reduce-scatter with sharded gradients",
			func(c *DDPConfig) { fsdp(ShardOptimGrads)(c); c.ReduceScatterWithFP32Accumulation = true },
			[][]string{{"reduce_scatter_with_fp32_accumulation", "data_parallel_sharding_strategy"}}, nil},
		{"fp32 local accumulation with sharded gradients",
			func(c *DDPConfig) {
				fsdp(ShardOptimGradsParams)(c)
				c.ParamNamePatternsForFP32LocalAccumulation = []string{"all"}
			},
			[][]string{{"param_name_patterns_for_fp32_local_accumulation", "data_parallel_sharding_strategy"}}, nil},
		{"overlap_param_gather with FSDP needs no distributed optimizer",
			func(c *DDPConfig) {
				fsdp(ShardOptimGradsParams)(c)
				c.OverlapParamGather, c.OverlapGradReduce = true, true
			}, nil, nil},
	})
	for _, tc := range []struct {
		strategy                           string
		distOpt, overlapGrad, overlapParam bool
	}{
		{NoShard, false, false, false},
		{ShardOptim, true, false, false},
		{ShardOptimGrads, true, true, false},
		{ShardOptimGradsParams, true, true, true},
	} {
		c := DefaultDDPConfig()
		c.UseCustomFSDP, c.DataParallelShardingStrategy = true, tc.strategy
		c.Finalize()
		if !c.UseMegatronFSDP || c.UseDistributedOptimizer != tc.distOpt || c.OverlapGradReduce != tc.overlapGrad || c.OverlapParamGather != tc.overlapParam {
			t.Errorf("%s: Finalize gives use_megatron_fsdp %v, use_distributed_optimizer %v, overlap_grad_reduce %v, overlap_param_gather %v; want true, %v, %v, %v",
				tc.strategy, c.UseMegatronFSDP, c.UseDistributedOptimizer, c.OverlapGradReduce, c.OverlapParamGather, tc.distOpt, tc.overlapGrad, tc.overlapParam)
		}
	}
	plain := DefaultDDPConfig()
	plain.Finalize()
	if plain.UseDistributedOptimizer || plain.OverlapGradReduce {
		t.Error("Finalize turned on the distributed optimizer or overlap without FSDP")
	}
}

// TestValidateTogether covers the rules that join the model-parallel config,
// the DDP config and the transformer config's calculate_per_token_loss.
func TestValidateTogether(t *testing.T) {
	interleaved := DefaultModelParallelConfig()
	interleaved.VirtualPipelineModelParallelSize = 2
	withPP(&interleaved, 4)

	cases := []struct {
		name     string
		mp       ModelParallelConfig
		ddp      func(*DDPConfig)
		perToken bool
		want     [][]string
		msg      []string
	}{
		{"per-token loss with average in collective", DefaultModelParallelConfig(),
			func(c *DDPConfig) { c.AverageInCollective = true }, true,
			[][]string{{"calculate_per_token_loss", "average_in_collective"}}, []string{"turn average_in_collective off"}},
		{"average in collective without per-token loss is valid", DefaultModelParallelConfig(),
			func(c *DDPConfig) { c.AverageInCollective = true }, false, nil, nil},
		{"align_param_gather without the interleaved schedule", DefaultModelParallelConfig(),
			func(c *DDPConfig) { c.AlignParamGather = true }, false,
			[][]string{{"align_param_gather", "virtual_pipeline_model_parallel_size"}}, []string{"unset (0)"}},
		{"align_param_gather with the interleaved schedule is valid", interleaved,
			func(c *DDPConfig) {
				c.AlignParamGather, c.OverlapParamGather, c.OverlapGradReduce, c.UseDistributedOptimizer = true, true, true, true
			}, false, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ddp := DefaultDDPConfig()
			tc.ddp(&ddp)
			err := ValidateTogether(tc.mp, ddp, tc.perToken)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("ValidateTogether() = %v, want nil", err)
				}
				return
			}
			checkViolations(t, asValidationError(t, err).Violations, tc.want, tc.msg)
		})
	}
}
