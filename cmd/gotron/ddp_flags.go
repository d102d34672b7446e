package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/train"
)

// addDDPFlags adds the data-parallel wrapper's and the distributed
// optimizer's flags (Megatron's spellings) and the mixed-precision ones.
func addDDPFlags(f *pflag.FlagSet, a *train.Args) {
	d := &a.DDP
	f.BoolVar(&d.UseDistributedOptimizer, "use-distributed-optimizer", d.UseDistributedOptimizer, "shard the optimizer state over the data-parallel ranks: gradients reduce-scattered, each rank updates its shard, parameters all-gathered")
	f.IntVar(&d.NumDistributedOptimizerInstances, "num-distributed-optimizer-instances", d.NumDistributedOptimizerInstances, "distributed-optimizer replicas (partial sharding): shards within dp·cp/N ranks, all-reduced across the N instances")
	f.BoolVar(&d.OverlapGradReduce, "overlap-grad-reduce", d.OverlapGradReduce, "reduce each gradient bucket asynchronously as soon as backward completes it, overlapped with the rest of backward")
	f.BoolVar(&d.OverlapParamGather, "overlap-param-gather", d.OverlapParamGather, "all-gather each bucket's updated parameters asynchronously, waited for just before the next forward pass uses them (needs --use-distributed-optimizer and --overlap-grad-reduce)")
	f.Bool("align-param-gather", false, "with --overlap-param-gather and the interleaved schedule, launch the parameter all-gathers of all pipeline stages together (the default there)")
	f.Bool("no-align-param-gather", false, "with --overlap-param-gather, let each model chunk launch its own parameter all-gathers")
	f.IntVar(&d.BucketSize, "ddp-bucket-size", d.BucketSize, "gradient bucket size in elements under --overlap-grad-reduce (0: max(40000000, 1000000·dp·cp))")
	f.IntVar(&d.NumBuckets, "ddp-num-buckets", d.NumBuckets, "split each model chunk's gradients into this many buckets instead (bucket size = parameters / N)")
	f.BoolVar(&d.PadBucketsForHighNCCLBusBW, "ddp-pad-buckets-for-high-nccl-busbw", d.PadBucketsForHighNCCLBusBW, "pad distributed-optimizer buckets to multiples of lcm(dp, 128, 65536) elements")
	f.BoolVar(&d.AverageInCollective, "ddp-average-in-collective", d.AverageInCollective, "average gradients inside the collective instead of pre-scaling by 1/(dp·cp)")
	f.BoolVar(&d.AverageInCollective, "average-in-collective", d.AverageInCollective, "the same as --ddp-average-in-collective")
	f.BoolVar(&d.ReduceScatterWithFP32Accumulation, "ddp-reduce-scatter-with-fp32-accumulation", d.ReduceScatterWithFP32Accumulation, "reduce-scatter as an all-to-all followed by a local float32 sum")
	f.BoolVar(&d.GradReduceInFP32, "accumulate-allreduce-grads-in-fp32", d.GradReduceInFP32, "keep and reduce gradients in float32 whatever the parameter type")
	f.BoolVar(&d.CheckForNaNInGrad, "check-for-nan-in-loss-and-grad", d.CheckForNaNInGrad, "check each micro-batch's local loss and each gradient bucket, before its reduction, for NaN and infinity (the default); a bad one stops every rank naming the iteration, micro-batch or parameter and bucket, and rank")
	f.Bool("no-check-for-nan-in-loss-and-grad", false, "skip the NaN and infinity checks of the losses and the gradient buckets")
	f.BoolVar(&a.Model.BF16, "bf16", a.Model.BF16, "mixed precision: bfloat16 parameters and GEMM inputs (on oneDNN's bf16 kernels where they are the faster on this CPU, else on float32 kernels: GOTRON_BF16_GEMM), float32 main parameters, gradients accumulated and reduced in float32")
	f.BoolVar(&a.Model.FP16, "fp16", a.Model.FP16, "mixed precision: float16 parameters and GEMM inputs, float32 main parameters, float16 gradients, dynamic loss scaling")
	f.BoolVar(&a.GradReduceInBF16, "grad-reduce-in-bf16", a.GradReduceInBF16, "with --bf16, accumulate and reduce gradients in bfloat16 instead of float32")
	f.Float64Var(&a.LossScale, "loss-scale", a.LossScale, "constant loss scale for --bf16/--fp16 (0: none for bf16, the dynamic scaler for fp16)")
	f.Float64Var(&a.InitialLossScale, "initial-loss-scale", a.InitialLossScale, "--fp16 dynamic loss scaler: starting scale")
	f.Float64Var(&a.MinLossScale, "min-loss-scale", a.MinLossScale, "--fp16 dynamic loss scaler: lowest scale")
	f.IntVar(&a.LossScaleWindow, "loss-scale-window", a.LossScaleWindow, "--fp16 dynamic loss scaler: iterations without a non-finite gradient before the scale doubles")
	f.IntVar(&a.Hysteresis, "hysteresis", a.Hysteresis, "--fp16 dynamic loss scaler: non-finite iterations tolerated before the scale halves")
	f.BoolVar(&d.UseMegatronFSDP, "use-megatron-fsdp", d.UseMegatronFSDP, "Megatron-FSDP: shard the optimizer state, gradients and (by default) parameters over the data-parallel ranks as --data-parallel-sharding-strategy says; turns on the distributed optimizer")
	f.BoolVar(&d.UseCustomFSDP, "use-custom-fsdp", d.UseCustomFSDP, "the deprecated name of --use-megatron-fsdp")
	f.StringVar(&d.DataParallelShardingStrategy, "data-parallel-sharding-strategy", d.DataParallelShardingStrategy, "Megatron-FSDP's sharding: no_shard (DDP), optim (ZeRO-1), optim_grads (ZeRO-2) or optim_grads_params (ZeRO-3, the default with --use-megatron-fsdp)")
	f.StringVar(&d.OuterDPShardingStrategy, "outer-dp-sharding-strategy", d.OuterDPShardingStrategy, "hybrid Megatron-FSDP (with --num-distributed-optimizer-instances) across the instances: no_shard (HSDP: the gradient shards all-reduced across them) or optim (HFSDP, with optim_grads_params: the optimizer state split across them too)")
	f.IntVar(&d.SuggestedCommunicationUnitSize, "suggested-communication-unit-size", d.SuggestedCommunicationUnitSize, "Megatron-FSDP (optim_grads, optim_grads_params): elements to communicate at once; parameter gathers are prefetched until half of it is in flight, gradient reductions held to it (0: twice the average unit)")
	f.BoolVar(&d.FSDPDoubleBuffer, "fsdp-double-buffer", d.FSDPDoubleBuffer, "Megatron-FSDP's fixed pair of communication buffers; refused: gotron's FSDP always reuses its released buffers, as many as the units in flight at once")
	f.IntVar(&d.MegatronFSDPVersion, "megatron-fsdp-version", d.MegatronFSDPVersion, "Megatron-FSDP implementation version (only 1 is provided)")
	f.BoolVar(&d.CheckForLargeGrads, "check-for-large-grads", d.CheckForLargeGrads, "stop when a gradient bucket's norm exceeds 10× the largest it had before")
	f.BoolVar(&a.CheckForSpikyLoss, "check-for-spiky-loss", a.CheckForSpikyLoss, "warn at an iteration whose loss is at least 10 times the largest of the first 100")
}

// ddpFlags reads the paired DDP flags into a, and applies Megatron's
// command-line default of Megatron-FSDP's strategy: optim_grads_params
// when --use-megatron-fsdp is given without one (the config's own default
// is no_shard).
func ddpFlags(cmd *cobra.Command, a *train.Args) error {
	f := cmd.Flags()
	if a.DDP.MegatronFSDP() && !f.Changed("data-parallel-sharding-strategy") {
		a.DDP.DataParallelShardingStrategy = config.ShardOptimGradsParams
	}
	for _, p := range []struct {
		on, off string
		set     func(bool)
	}{
		{"align-param-gather", "no-align-param-gather", func(v bool) { a.AlignParamGather = &v }},
		{"check-for-nan-in-loss-and-grad", "no-check-for-nan-in-loss-and-grad", func(v bool) { a.DDP.CheckForNaNInGrad, a.CheckForNaNInLossAndGrad = v, v }},
	} {
		on, off := f.Changed(p.on), f.Changed(p.off)
		if on && off {
			return fmt.Errorf("--%s and --%s contradict each other: give one", p.on, p.off)
		}
		if on {
			v, _ := f.GetBool(p.on)
			p.set(v)
		}
		if off {
			v, _ := f.GetBool(p.off)
			p.set(!v)
		}
	}
	return nil
}
