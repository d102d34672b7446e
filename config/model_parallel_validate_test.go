package config

import (
	"strings"
	"testing"
)

type mpCase = ruleCase[ModelParallelConfig]

// withPP sets a pipeline size and the pipeline dtype it requires.
func withPP(c *ModelParallelConfig, pp int) {
	c.PipelineModelParallelSize = pp
	c.PipelineDType = Float32
}

// runMPCases applies each case to a default config and checks Violations.
func runMPCases(t *testing.T, cases []mpCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultModelParallelConfig()
			tc.change(&c)
			checkViolations(t, c.Violations(), tc.want, tc.msg)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if ve := asValidationError(t, err); len(ve.Violations) != len(tc.want) {
				t.Fatalf("Validate() has %d violations, Violations() %d", len(ve.Violations), len(tc.want))
			}
		})
	}
}

func TestModelParallelSizes(t *testing.T) {
	runMPCases(t, []mpCase{
		{"tp below 1", func(c *ModelParallelConfig) { c.TensorModelParallelSize = 0 },
			[][]string{{"tensor_model_parallel_size"}}, []string{"= 0", "≥ 1"}},
		{"pp below 1", func(c *ModelParallelConfig) { c.PipelineModelParallelSize = -1 },
			[][]string{{"pipeline_model_parallel_size"}}, []string{"= -1"}},
		{"cp below 1", func(c *ModelParallelConfig) { c.ContextParallelSize = 0 },
			[][]string{{"context_parallel_size"}}, nil},
		{"ep below 1", func(c *ModelParallelConfig) { c.ExpertModelParallelSize = 0 },
			[][]string{{"expert_model_parallel_size"}}, nil},
		{"etp negative", func(c *ModelParallelConfig) { c.ExpertTensorParallelSize = -2 },
			[][]string{{"expert_tensor_parallel_size"}}, []string{"= -2", "0 (unset)"}},
		{"vpp negative", func(c *ModelParallelConfig) { c.VirtualPipelineModelParallelSize = -1 },
			[][]string{{"virtual_pipeline_model_parallel_size"}}, nil},
		{"group size negative", func(c *ModelParallelConfig) { c.MicrobatchGroupSizePerVPStage = -3 },
			[][]string{{"microbatch_group_size_per_vp_stage"}}, []string{"= -3"}},
		{"weight shards negative", func(c *ModelParallelConfig) { c.TensorParallelNumWeightShards = -1 },
			[][]string{{"tensor_parallel_num_weight_shards"}}, nil},
		{"expert weight shards negative", func(c *ModelParallelConfig) { c.ExpertTensorParallelNumWeightShards = -1 },
			[][]string{{"expert_tensor_parallel_num_weight_shards"}}, nil},
		{"partial checkpoints negative", func(c *ModelParallelConfig) { c.NumMicrobatchesWithPartialActivationCheckpoints = intPtr(-1) },
			[][]string{{"num_microbatches_with_partial_activation_checkpoints"}}, []string{"= -1"}},
		{"partial checkpoints zero is valid", func(c *ModelParallelConfig) { c.NumMicrobatchesWithPartialActivationCheckpoints = intPtr(0) },
			nil, nil},
	})
}

func TestModelParallelDTypes(t *testing.T) {
	runMPCases(t, []mpCase{
		{"params_dtype unset", func(c *ModelParallelConfig) { c.ParamsDType = DTypeNone },
			[][]string{{"params_dtype"}}, []string{"unset"}},
		{"params_dtype invalid", func(c *ModelParallelConfig) { c.ParamsDType = DType(9) },
			[][]string{{"params_dtype"}}, []string{"DType(9)"}},
		{"autocast_dtype invalid", func(c *ModelParallelConfig) { c.AutocastDType = DType(7) },
			[][]string{{"autocast_dtype"}}, nil},
		{"pipeline_dtype invalid", func(c *ModelParallelConfig) { c.PipelineDType = DType(5) },
			[][]string{{"pipeline_dtype"}}, nil},
		{"fp16 with bf16", func(c *ModelParallelConfig) { c.FP16, c.BF16 = true, true },
			[][]string{{"fp16", "bf16"}}, []string{"choose one"}},
	})
}

// TestModelParallelReferenceRules covers docs/SEMANTICS.md
// § ModelParallelConfig checks.
func TestModelParallelReferenceRules(t *testing.T) {
	runMPCases(t, []mpCase{
		{"rule 1: sequence parallel without tensor parallel",
			func(c *ModelParallelConfig) { c.SequenceParallel = true },
			[][]string{{"sequence_parallel", "tensor_model_parallel_size"}},
			[]string{"tensor_model_parallel_size is 1", "drop --sequence-parallel"}},
		{"rule 1: sequence parallel with tensor parallel is valid",
			func(c *ModelParallelConfig) { c.SequenceParallel, c.TensorModelParallelSize = true, 2 }, nil, nil},
		{"rule 3: weight shards below tp",
			func(c *ModelParallelConfig) { c.TensorModelParallelSize, c.TensorParallelNumWeightShards = 4, 2 },
			[][]string{{"tensor_parallel_num_weight_shards", "tensor_model_parallel_size"}},
			[]string{"(2) must be ≥ tensor_model_parallel_size (4)"}},
		{"rule 3: weight shards not divisible by tp",
			func(c *ModelParallelConfig) { c.TensorModelParallelSize, c.TensorParallelNumWeightShards = 4, 6 },
			[][]string{{"tensor_parallel_num_weight_shards", "tensor_model_parallel_size"}},
			[]string{"6 mod 4 = 2"}},
		{"rule 3: weight shards giving GTP > 1 (not provided)",
			func(c *ModelParallelConfig) { c.TensorModelParallelSize, c.TensorParallelNumWeightShards = 4, 8 },
			[][]string{{"tensor_parallel_num_weight_shards", "tensor_model_parallel_size"}},
			[]string{"8/4 = 2", "not provided"}},
		{"rule 3: weight shards equal to tp are valid",
			func(c *ModelParallelConfig) { c.TensorModelParallelSize, c.TensorParallelNumWeightShards = 4, 4 }, nil, nil},
		{"rule 3: gtp_weight_remat_size set directly",
			func(c *ModelParallelConfig) { c.GTPWeightRematSize = 2 },
			[][]string{{"gtp_weight_remat_size"}}, []string{"= 2", "set it to 1"}},
		{"rule 3: expert weight shards read the effective etp",
			func(c *ModelParallelConfig) { c.TensorModelParallelSize, c.ExpertTensorParallelNumWeightShards = 4, 2 },
			[][]string{{"expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size"}},
			[]string{"(2) must be ≥ expert_tensor_parallel_size (4)"}},
		{"rule 3: expert weight shards not divisible by etp",
			func(c *ModelParallelConfig) { c.ExpertTensorParallelSize, c.ExpertTensorParallelNumWeightShards = 2, 3 },
			[][]string{{"expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size"}},
			[]string{"3 mod 2 = 1"}},
		{"rule 3: expert_gtp_weight_remat_size set directly",
			func(c *ModelParallelConfig) { c.ExpertGTPWeightRematSize = 0 },
			[][]string{{"expert_gtp_weight_remat_size"}}, []string{"= 0"}},
		{"rule 4: pipeline parallel without pipeline_dtype",
			func(c *ModelParallelConfig) { c.PipelineModelParallelSize = 4 },
			[][]string{{"pipeline_dtype", "pipeline_model_parallel_size"}},
			[]string{"pipeline_model_parallel_size = 4", "float32"}},
		{"rule 6: Transformer Engine cross entropy",
			func(c *ModelParallelConfig) { c.CrossEntropyLossFusion, c.CrossEntropyFusionImpl = true, "te" },
			[][]string{{"cross_entropy_fusion_impl"}}, []string{`"te"`, "not provide", `"native"`}},
		{"rule 6: unknown cross entropy implementation",
			func(c *ModelParallelConfig) { c.CrossEntropyFusionImpl = "fast" },
			[][]string{{"cross_entropy_fusion_impl"}}, []string{`"fast"`}},
		{"rule 7: deferred embedding wgrad without pipeline parallel",
			func(c *ModelParallelConfig) { c.DeferEmbeddingWgradCompute, c.GradientAccumulationFusion = true, true },
			[][]string{{"defer_embedding_wgrad_compute", "pipeline_model_parallel_size"}},
			[]string{"pipeline_model_parallel_size = 1"}},
		{"rule 8: deferred embedding wgrad without gradient accumulation fusion",
			func(c *ModelParallelConfig) { c.DeferEmbeddingWgradCompute = true; withPP(c, 2) },
			[][]string{{"defer_embedding_wgrad_compute", "gradient_accumulation_fusion"}},
			nil},
		{"rule 9: negative wgrad deferral limit",
			func(c *ModelParallelConfig) {
				c.DeferEmbeddingWgradCompute, c.GradientAccumulationFusion, c.WgradDeferralLimit = true, true, -1
				withPP(c, 2)
			},
			[][]string{{"wgrad_deferral_limit", "defer_embedding_wgrad_compute"}},
			[]string{"= -1"}},
		{"rule 9: wgrad deferral limit is not read without deferral",
			func(c *ModelParallelConfig) { c.WgradDeferralLimit = -1 }, nil, nil},
		{"deferred embedding wgrad with pipeline parallel and fusion",
			func(c *ModelParallelConfig) {
				c.DeferEmbeddingWgradCompute, c.GradientAccumulationFusion, c.WgradDeferralLimit = true, true, 3
				withPP(c, 2)
			}, nil, nil},
		{"rule 12: warmup/flush overlap without overlap_p2p_comm",
			func(c *ModelParallelConfig) { c.OverlapP2PCommWarmupFlush, c.BatchP2PComm = true, false },
			[][]string{{"overlap_p2p_comm_warmup_flush", "overlap_p2p_comm", "batch_p2p_comm"}},
			[]string{"overlap_p2p_comm = false", "batch_p2p_comm = false"}},
		{"rule 12: warmup/flush overlap with the default batch_p2p_comm",
			func(c *ModelParallelConfig) {
				c.OverlapP2PCommWarmupFlush, c.OverlapP2PComm, c.VirtualPipelineModelParallelSize = true, true, 2
				withPP(c, 4)
			},
			[][]string{{"overlap_p2p_comm_warmup_flush", "overlap_p2p_comm", "batch_p2p_comm"},
				{"overlap_p2p_comm", "batch_p2p_comm"}},
			[]string{"batch_p2p_comm = true"}},
		{"rule 12: warmup/flush overlap, correctly set, is valid",
			func(c *ModelParallelConfig) {
				c.OverlapP2PCommWarmupFlush, c.OverlapP2PComm, c.BatchP2PComm = true, true, false
				c.VirtualPipelineModelParallelSize = 2
				withPP(c, 4)
			}, nil, nil},
	})
}

// TestModelParallelPipelineRules covers the rules the reference enforces in
// its schedules, initialize_model_parallel and training layer.
func TestModelParallelPipelineRules(t *testing.T) {
	runMPCases(t, []mpCase{
		{"overlap_p2p_comm with batch_p2p_comm",
			func(c *ModelParallelConfig) {
				c.OverlapP2PComm, c.VirtualPipelineModelParallelSize = true, 2
				withPP(c, 4)
			},
			[][]string{{"overlap_p2p_comm", "batch_p2p_comm"}}, []string{"batch_p2p_comm = false"}},
		{"overlap_p2p_comm without the interleaved schedule",
			func(c *ModelParallelConfig) { c.OverlapP2PComm, c.BatchP2PComm = true, false; withPP(c, 4) },
			[][]string{{"overlap_p2p_comm", "virtual_pipeline_model_parallel_size"}}, []string{"unset (0)"}},
		{"interleaved schedule without pipeline parallel",
			func(c *ModelParallelConfig) { c.VirtualPipelineModelParallelSize = 2 },
			[][]string{{"virtual_pipeline_model_parallel_size", "pipeline_model_parallel_size"}},
			[]string{"virtual_pipeline_model_parallel_size = 2", "(here 1)"}},
		{"interleaved schedule with pp = 2 and no overlap",
			func(c *ModelParallelConfig) { c.VirtualPipelineModelParallelSize = 2; withPP(c, 2) },
			[][]string{{"virtual_pipeline_model_parallel_size", "pipeline_model_parallel_size", "overlap_p2p_comm"}},
			[]string{"> 2 (here 2)"}},
		{"interleaved schedule with pp = 2 and overlap is valid",
			func(c *ModelParallelConfig) {
				c.VirtualPipelineModelParallelSize, c.OverlapP2PComm, c.BatchP2PComm = 2, true, false
				withPP(c, 2)
			}, nil, nil},
		{"interleaved schedule with pp = 3 is valid",
			func(c *ModelParallelConfig) { c.VirtualPipelineModelParallelSize = 1; withPP(c, 3) }, nil, nil},
		{"microbatch group smaller than pp",
			func(c *ModelParallelConfig) {
				c.VirtualPipelineModelParallelSize, c.MicrobatchGroupSizePerVPStage = 2, 2
				withPP(c, 4)
			},
			[][]string{{"microbatch_group_size_per_vp_stage", "pipeline_model_parallel_size"}},
			[]string{"= 2", "= 4", "at least 4"}},
		{"microbatch group is not read without the interleaved schedule",
			func(c *ModelParallelConfig) { c.MicrobatchGroupSizePerVPStage = 2; withPP(c, 4) }, nil, nil},
	})
}

func TestModelParallelContextParallel(t *testing.T) {
	runMPCases(t, []mpCase{
		{"hierarchical sizes do not multiply to cp",
			func(c *ModelParallelConfig) {
				c.ContextParallelSize, c.HierarchicalContextParallelSizes = 8, []int{2, 2}
			},
			[][]string{{"hierarchical_context_parallel_sizes", "context_parallel_size"}},
			[]string{"2·2 = 4", "context_parallel_size = 8"}},
		{"hierarchical level below 1",
			func(c *ModelParallelConfig) {
				c.ContextParallelSize, c.HierarchicalContextParallelSizes = 4, []int{4, 0}
			},
			[][]string{{"hierarchical_context_parallel_sizes"}}, []string{"[1] = 0"}},
		{"hierarchical sizes multiplying to cp are valid",
			func(c *ModelParallelConfig) {
				c.ContextParallelSize, c.HierarchicalContextParallelSizes = 8, []int{2, 4}
			},
			nil, nil},
	})
}

// TestModelParallelNotProvided checks that each GPU-only or otherwise
// unprovided setting, changed from its default, is reported on its own, with
// the CPU backend named as the reason.
func TestModelParallelNotProvided(t *testing.T) {
	changes := map[string]func(*ModelParallelConfig){
		"max_seqlen_per_dp_cp_rank":                    func(c *ModelParallelConfig) { c.MaxSeqlenPerDPCPRank = 4096 },
		"hybrid_context_parallel":                      func(c *ModelParallelConfig) { c.HybridContextParallel = true },
		"use_te_rng_tracker":                           func(c *ModelParallelConfig) { c.UseTERNGTracker = true },
		"tp_comm_overlap":                              func(c *ModelParallelConfig) { c.TPCommOverlap = true },
		"tp_comm_bulk_wgrad":                           func(c *ModelParallelConfig) { c.TPCommBulkWgrad = false },
		"tp_comm_bulk_dgrad":                           func(c *ModelParallelConfig) { c.TPCommBulkDgrad = false },
		"tp_comm_overlap_ag":                           func(c *ModelParallelConfig) { c.TPCommOverlapAG = false },
		"tp_comm_overlap_rs":                           func(c *ModelParallelConfig) { c.TPCommOverlapRS = false },
		"tp_comm_overlap_rs_dgrad":                     func(c *ModelParallelConfig) { c.TPCommOverlapRSDgrad = true },
		"tp_comm_split_ag":                             func(c *ModelParallelConfig) { c.TPCommSplitAG = false },
		"tp_comm_atomic_ag":                            func(c *ModelParallelConfig) { c.TPCommAtomicAG = true },
		"tp_comm_split_rs":                             func(c *ModelParallelConfig) { c.TPCommSplitRS = false },
		"tp_comm_atomic_rs":                            func(c *ModelParallelConfig) { c.TPCommAtomicRS = true },
		"tp_comm_overlap_disable_qkv":                  func(c *ModelParallelConfig) { c.TPCommOverlapDisableQKV = true },
		"tp_comm_overlap_disable_fc1":                  func(c *ModelParallelConfig) { c.TPCommOverlapDisableFC1 = true },
		"tp_comm_bootstrap_backend":                    func(c *ModelParallelConfig) { c.TPCommBootstrapBackend = "mpi" },
		"overlap_moe_expert_parallel_comm":             func(c *ModelParallelConfig) { c.OverlapMoEExpertParallelComm = true },
		"delay_wgrad_compute":                          func(c *ModelParallelConfig) { c.DelayWgradCompute = true },
		"overlap_dispatch_backward_with_experts_wgrad": func(c *ModelParallelConfig) { c.OverlapDispatchBackwardWithExpertsWgrad = true },
		"ep_overlap_early_attn_memory_release":         func(c *ModelParallelConfig) { c.EPOverlapEarlyAttnMemoryRelease = true },
		"use_ring_exchange_p2p":                        func(c *ModelParallelConfig) { c.UseRingExchangeP2P = true },
		"cpu_offloading":                               func(c *ModelParallelConfig) { c.CPUOffloading = true },
		"cpu_offloading_num_layers":                    func(c *ModelParallelConfig) { c.CPUOffloadingNumLayers = 2 },
		"cpu_offloading_context":                       func(c *ModelParallelConfig) { c.CPUOffloadingContext = func() func() { return func() {} } },
		"cpu_offloading_activations":                   func(c *ModelParallelConfig) { c.CPUOffloadingActivations = false },
		"cpu_offloading_weights":                       func(c *ModelParallelConfig) { c.CPUOffloadingWeights = true },
		"cpu_offloading_double_buffering":              func(c *ModelParallelConfig) { c.CPUOffloadingDoubleBuffering = true },
		"cpu_offloading_retain_pinned_cpu_buffers":     func(c *ModelParallelConfig) { c.CPUOffloadingRetainPinnedCPUBuffers = true },
	}
	var cases []mpCase
	for name, change := range changes {
		cases = append(cases, mpCase{name, change, [][]string{{name}}, []string{"CPU backend does not provide"}})
	}
	runMPCases(t, cases)
}

func TestModelParallelBackendValues(t *testing.T) {
	runMPCases(t, []mpCase{
		{"unknown tp_comm_bootstrap_backend", func(c *ModelParallelConfig) { c.TPCommBootstrapBackend = "tcp" },
			[][]string{{"tp_comm_bootstrap_backend"}}, []string{`"tcp"`}},
		{"unknown pipeline_model_parallel_comm_backend", func(c *ModelParallelConfig) { c.PipelineModelParallelCommBackend = "mpi" },
			[][]string{{"pipeline_model_parallel_comm_backend"}}, []string{`"mpi"`, "no-ops"}},
		{"autocast", func(c *ModelParallelConfig) { c.EnableAutocast = true },
			[][]string{{"enable_autocast"}}, []string{"autocast", "--bf16"}},
	})
}

// TestModelParallelAcceptedNoOps checks that perf-only knobs are accepted.
func TestModelParallelAcceptedNoOps(t *testing.T) {
	c := DefaultModelParallelConfig()
	c.BatchP2PSync = false
	c.BarrierWithL1Time = false
	c.PipelineModelParallelCommBackend = "ucc"
	c.CrossEntropyLossFusion = true
	c.DeterministicMode = true
	c.UseCPUInitialization = true
	c.PerformInitialization = false
	c.AutocastDType = BFloat16 // without enable_autocast: unused
	c.VariableSeqLengths = true
	c.DeallocatePipelineOutputs = true
	c.MTPStandalone = true
	c.BF16, c.ParamsDType = true, BFloat16
	c.Timers = func(string, int) Timer { return nil }
	c.GradScaleFunc = func() float32 { return 1 }
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
}

func TestModelParallelWarnings(t *testing.T) {
	c := DefaultModelParallelConfig()
	c.ExpertModelParallelSize, c.TensorModelParallelSize = 4, 2
	if err := c.Validate(); err != nil {
		t.Fatalf("EP with TP without SP must be a warning, not an error: %v", err)
	}
	w := c.Warnings()
	if len(w) != 1 {
		t.Fatalf("Warnings() = %q, want one", w)
	}
	for _, s := range []string{"expert_model_parallel_size = 4", "tensor_model_parallel_size = 2", "sequence_parallel = true"} {
		if !strings.Contains(w[0], s) {
			t.Errorf("warning lacks %q: %q", s, w[0])
		}
	}
	c.SequenceParallel = true
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("with sequence parallel: Warnings() = %q, want none", w)
	}
	c.SequenceParallel, c.TensorModelParallelSize = false, 1
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("with tp = 1: Warnings() = %q, want none", w)
	}
}

// TestModelParallelValidateDoesNotModify: Validate judges the config as
// Finalize would complete it (an unset expert TP size is the TP size,
// autocast's type the parameters'), yet the caller's config is the same
// afterwards, including what its slice and pointer fields point at, which
// a value receiver does not protect.
func TestModelParallelValidateDoesNotModify(t *testing.T) {
	c := DefaultModelParallelConfig()
	c.TensorModelParallelSize, c.ContextParallelSize = 2, 4
	c.HierarchicalContextParallelSizes = []int{2, 2}
	partial := 1
	c.NumMicrobatchesWithPartialActivationCheckpoints = &partial
	c.ExpertTensorParallelSize, c.AutocastDType = 0, DTypeNone
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v (an unset expert TP size or autocast type is Finalize's to fill)", err)
	}
	if c.ExpertTensorParallelSize != 0 || c.AutocastDType != DTypeNone || c.TensorModelParallelSize != 2 {
		t.Errorf("Validate changed the config's fields: expert TP %d, autocast %v", c.ExpertTensorParallelSize, c.AutocastDType)
	}
	if partial != 1 || len(c.HierarchicalContextParallelSizes) != 2 || c.HierarchicalContextParallelSizes[0] != 2 || c.HierarchicalContextParallelSizes[1] != 2 {
		t.Errorf("Validate wrote through the config's references: partial checkpoints %d, hierarchical sizes %v", partial, c.HierarchicalContextParallelSizes)
	}
}

// TestGradientAccumulationFusionAccepted: gradient_accumulation_fusion is
// honoured (nn.AccumulateWeightGrad), either way, not refused as a GPU
// kernel.
func TestGradientAccumulationFusionAccepted(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := DefaultModelParallelConfig()
		c.GradientAccumulationFusion = on
		if err := c.Validate(); err != nil {
			t.Errorf("gradient_accumulation_fusion = %v: %v", on, err)
		}
	}
}
