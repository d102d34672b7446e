package train

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/source"
	"github.com/gotron/gotron/data/tokenizer"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/optim"
	"github.com/gotron/gotron/pp"
)

// Args are the training settings, named as Megatron's command-line
// arguments (in Go form).
type Args struct {
	// Model is the transformer and its parallel layout.
	Model config.TransformerConfig
	// DDP configures data-parallel gradient reduction.
	DDP config.DDPConfig
	// AlignParamGather, when set, overrides DDP.AlignParamGather, which
	// otherwise follows the reference's training layer: on with
	// overlap_param_gather under the interleaved schedule, else off.
	AlignParamGather *bool

	// Precision holds the loss-scaling and gradient-type settings of a
	// mixed-precision run (Model.BF16 or Model.FP16).
	Precision

	// WorldSize is the number of ranks run as goroutines of this process
	// (ignored when a world group is passed to Run).
	WorldSize int

	MicroBatchSize  int // --micro-batch-size
	GlobalBatchSize int // --global-batch-size: micro·dp·accumulation steps
	TrainIters      int // --train-iters
	// TrainSamples is --train-samples: train for this many samples, as
	// many iterations as whole global batches fit (TrainSamples /
	// GlobalBatchSize without a ramp), with the learning-rate
	// schedule counted in samples (--lr-warmup-samples,
	// --lr-decay-samples); 0: --train-iters.
	TrainSamples int
	// RampupBatchSize is --rampup-batch-size START INCREMENT SAMPLES: the
	// global batch ramps from START to GlobalBatchSize (see data.Ramp; needs
	// TrainSamples). The zero value: a constant global batch.
	RampupBatchSize data.Ramp
	// StepBatchSizeSchedule is --step-batch-size-schedule "THRESHOLD:BATCH
	// …": the global batch of each iteration by the tokens consumed before
	// it (see data.ParseStepSchedule; Megatron's replacement of the ramp).
	// GlobalBatchSize is then its last batch. "": none.
	StepBatchSizeSchedule string
	// SkipTrain is --skip-train: no training iterations, only the
	// evaluation (and sample) of the loaded model.
	SkipTrain bool

	LR            float64 // --lr
	MinLR         float64 // --min-lr
	LRDecayStyle  string  // --lr-decay-style
	LRWarmupIters int     // --lr-warmup-iters
	LRWarmupInit  float64 // --lr-warmup-init: where the warmup starts (0)
	LRDecayIters  int     // --lr-decay-iters (0: TrainIters)
	// LRWarmupFraction is --lr-warmup-fraction: the warmup as a fraction
	// of the decay (iterations or samples), instead of --lr-warmup-iters.
	LRWarmupFraction float64
	LRWarmupSamples  int     // --lr-warmup-samples (with --train-samples)
	LRDecaySamples   int     // --lr-decay-samples (with --train-samples; 0: TrainSamples)
	WeightDecay      float64 // --weight-decay
	// LRWSDDecayIters and LRWSDDecaySamples (with --train-samples) are
	// --lr-decay-style WSD's annealing at the end of the decay, in the
	// shape LRWSDDecayStyle: exponential (the default), linear, cosine or
	// minus_sqrt (--lr-wsd-decay-*).
	LRWSDDecayIters, LRWSDDecaySamples int
	LRWSDDecayStyle                    string
	// WeightDecayIncrStyle is --weight-decay-incr-style: constant (the
	// default: --weight-decay throughout), or linear or cosine from
	// StartWeightDecay to EndWeightDecay over the run (--start- and
	// --end-weight-decay, nil when not given; required then, refused
	// with constant, as Megatron's).
	WeightDecayIncrStyle             string
	StartWeightDecay, EndWeightDecay *float64
	// WeightDecayIncrIters is the increment's length in the schedule's
	// unit: 0 for the run's (--train-iters or --train-samples), as
	// Megatron's; --use-checkpoint-opt_param-scheduler sets the
	// checkpoint's.
	WeightDecayIncrIters int
	// Optimizer is --optimizer: adam (the default) or sgd, with
	// SGDMomentum (--sgd-momentum, 0.9; 0: none).
	Optimizer   string
	SGDMomentum float64
	AdamBeta1   float64 // --adam-beta1
	AdamBeta2   float64 // --adam-beta2
	AdamEps     float64 // --adam-eps
	ClipGrad    float64 // --clip-grad (0 disables)
	Seed        uint64  // --seed

	LogInterval  int // --log-interval
	EvalInterval int // --eval-interval (0: only at the end)
	EvalIters    int // --eval-iters
	SaveInterval int // --save-interval
	// NonPersistentSaveInterval saves every this many iterations into
	// NonPersistentDir, keeping only the newest there, for a fast
	// restart (--non-persistent-save-interval); NonPersistentCkptType is
	// "global" (the only one built; "" with an interval means global),
	// and NonPersistentGlobalCkptDir the directory ("": SAVE/non_persistent).
	// A --load then resumes from the newer of the two.
	NonPersistentSaveInterval  int
	NonPersistentCkptType      string
	NonPersistentGlobalCkptDir string

	Save string // --save: checkpoint directory
	Load string // --load: checkpoint directory to resume from

	// Checkpoint contents, as Megatron's flags: NoSaveOptim and NoSaveRNG
	// leave the optimizer state and the generators out of a save;
	// NoLoadOptim and NoLoadRNG ignore them on load (Adam starts afresh
	// with zero moments and step 0; the generators start from the seed);
	// Finetune loads the weights only and starts at iteration 0; CkptStep
	// loads that iteration instead of the tracker's (0: the tracker's);
	// UseCheckpointArgs takes the model's shape (layers, width, heads, FFN,
	// positions, vocabulary, sequence length) and its options (the
	// normalisation, activation, biases, key/value groups, head dimension,
	// position embedding, untied output layer, …: those a checkpoint
	// records) from the checkpoint.
	NoSaveOptim, NoSaveRNG, NoLoadOptim, NoLoadRNG, Finetune, UseCheckpointArgs bool
	// ExitOnMissingCheckpoint refuses a --load that holds no checkpoint
	// where gotron would otherwise start from scratch (--load that is
	// also --save; --exit-on-missing-checkpoint).
	ExitOnMissingCheckpoint bool
	// CkptFormat is --ckpt-format: torch_dist, the only one. gotron's
	// checkpoints are one sharded format that loads at any layout, the
	// role of Megatron's torch_dist (its default); torch (a rank's whole
	// state per file) and the others are refused.
	CkptFormat string
	// OverrideOptParamScheduler and UseCheckpointOptParamScheduler decide,
	// on resume, between this run's learning-rate schedule and the
	// checkpoint's when they differ (--override-opt_param-scheduler,
	// --use-checkpoint-opt_param-scheduler): without either a difference
	// is refused, as Megatron refuses it.
	OverrideOptParamScheduler, UseCheckpointOptParamScheduler bool
	CkptStep                                                  int
	// AsyncSave is --async-save: a save blocks training only while the
	// pieces are copied; the shards are written in the background and the
	// iteration is installed at the end of a later iteration, once every
	// rank's shard is written (or before the next save, a stop or the
	// end of the run).
	AsyncSave bool

	// ExitSignalHandler is --exit-signal-handler: SIGTERM or SIGINT
	// finishes the iteration, saves (with --save) and ends the run with
	// status 0 on every rank; a second signal exits at once. Without it,
	// gotron train still finishes the iteration and saves when --save is
	// given, but exits with 128+signal.
	ExitSignalHandler bool
	// ExitInterval is --exit-interval: stop (and save) when the iteration
	// is a multiple of it (0: never).
	ExitInterval int
	// ExitDurationInMins is --exit-duration-in-mins: stop (and save) after
	// the first iteration that ends this many minutes after training began
	// (0: never).
	ExitDurationInMins float64

	LoadInit  string // --load-init: initial weights (safetensors)
	DumpGrads string // --dump-grads: first step's gradients (safetensors)
	LogJSON   string // --log-json: one JSON object per iteration
	// LogThroughput adds the model TFLOP/s per rank to the iteration
	// line (--log-throughput, Megatron's per-GPU throughput).
	LogThroughput bool
	// LogParamsNorm and LogNumZerosInGrad add, each iteration, the
	// updated parameters' global L2 norm and the count of zero elements
	// of the main gradients to the iteration line, --log-json and
	// TensorBoard (--log-params-norm, --log-num-zeros-in-grad:
	// optim.Optimizer's ParamsNorm and ZerosInGrad).
	LogParamsNorm, LogNumZerosInGrad bool
	// CheckForNaNInLossAndGrad is the loss half of
	// --check-for-nan-in-loss-and-grad (on, as Megatron's default;
	// --no-check-for-nan-in-loss-and-grad): a micro-batch whose local loss
	// sum is NaN or infinite ends the run, naming the iteration, the
	// micro-batch and the rank. The flag's gradient half is the DDP
	// config's CheckForNaNInGrad. (Without either, a non-finite loss or
	// gradient norm still ends the run at the end of its iteration,
	// without naming where.)
	CheckForNaNInLossAndGrad bool
	// CheckForSpikyLoss is --check-for-spiky-loss: a warning when an
	// iteration's loss is at least SpikyLossFactor times the largest of the
	// run's first spikyLossSamples.
	CheckForSpikyLoss bool
	// TimingLogLevel (--timing-log-level, 0–2) reports, after each
	// iteration line, the time per iteration of the timers at or below it
	// (the pipeline schedules' passes and steps and their communication
	// at 1 and 2, the optimizer at 1), over the ranks as
	// TimingLogOption says ("minmax", "max" or "all"; "" is minmax).
	TimingLogLevel  int
	TimingLogOption string
	// LogStraggler (--log-straggler) compares the ranks' time in each timed
	// phase every --log-interval iterations and names those slower than
	// the median by more than StragglerThreshold (a fraction, 0.1), the
	// StragglerMinmaxCount slowest of each phase at most
	// (--straggler-minmax-count, 1).
	LogStraggler         bool
	StragglerThreshold   float64
	StragglerMinmaxCount int
	// RerunMode is --rerun-mode: disabled (the default), validate_results
	// (an iteration in which a rank's local loss is not finite runs its
	// forward and backward again before the optimizer step, and the
	// comparison, bit for bit, tells a fault of the machine from a
	// divergence) or report_stats (every iteration runs twice, and the
	// log reports how often the two differ).
	RerunMode string
	// InjectFault is --inject-fault KIND@RANK:ITER,…, faults for tests and
	// drills (ParseFaults): kill, hang, slow=F, nan, bitflip.
	InjectFault string
	// InprocessRestart (--inprocess-restart) runs the job again in this
	// process from --save's newest checkpoint when its ranks fail, at most
	// InprocessMaxIterations times (--inprocess-max-iterations; 3). Only
	// with ranks in this process, and --save.
	InprocessRestart       bool
	InprocessMaxIterations int
	// TensorBoard is --tensorboard-dir and its family.
	TensorBoard TensorBoard
	// PipelineSchedule is --pipeline-schedule: "" or "1f1b" for the
	// reference's choice (1F1B, interleaved with virtual stages), "zb-h1",
	// "zb-h2", "zb-v" and "dualpipev" for the zero-bubble schedules
	// (pp.ZeroBubbleH1, pp.ZeroBubbleH2, pp.ZeroBubbleV, pp.DualPipeV; the
	// last two place the model's chunks in a V, pp.PlacementOf).
	PipelineSchedule string
	// ProfileSchedule, when set, is an SVG file that receives the measured
	// schedule timeline of the last iteration, every rank (--profile-schedule).
	ProfileSchedule string

	// Data is the data flags: exactly one source.
	source.Data
	// tok is the tokenizer built from Data.Tokenizer (withTokenizer).
	tok tokenizer.Tokenizer
	// dataNote says how the data settings differ from --load's checkpoint
	// (checkLoad), for the start-up line.
	dataNote string
	// restarted marks an in-process restart's run: --log-json appends
	// (the records of the iterations it runs again follow those of the
	// attempt that failed), and --inject-fault's faults, which happened,
	// do not recur.
	restarted bool
	// resumedAt is where --load's checkpoint left the run (checkLoad;
	// zero without one, or with --finetune), from which the batches a run
	// reaches are checked.
	resumedAt resumePoint

	// OverlapP2PComm is --overlap-p2p-communication (true) or
	// --no-overlap-p2p-communication (false); nil means Megatron's default:
	// overlapped with the interleaved schedule, not without it.
	OverlapP2PComm *bool

	// DistributedTimeoutMinutes bounds every collective wait.
	DistributedTimeoutMinutes float64
	// Threads is the number of cores the process uses (0: all).
	Threads int

	// Sample is the number of bytes of text to generate after training (0:
	// none); SamplePrompt starts it; SampleTemperature scales the logits (0: greedy).
	Sample            int
	SamplePrompt      string
	SampleTemperature float64
}

// maxTimeoutMinutes bounds --distributed-timeout-minutes (a year), far
// below the ~292 years a time.Duration holds.
const maxTimeoutMinutes = 365 * 24 * 60

// defaultDDP is the DDP config of the training layer: the core defaults
// with check_for_nan_in_grad on (Megatron's
// --check-for-nan-in-loss-and-grad defaults to true).
func defaultDDP() config.DDPConfig {
	c := config.DefaultDDPConfig()
	c.CheckForNaNInGrad = true
	return c
}

// DefaultArgs returns Megatron's defaults where it has them.
func DefaultArgs() Args {
	return Args{
		Model:                     trainingModel(),
		DDP:                       defaultDDP(),
		WorldSize:                 1,
		CheckForNaNInLossAndGrad:  true,
		StragglerThreshold:        0.1,
		InprocessMaxIterations:    3,
		RerunMode:                 RerunDisabled,
		StragglerMinmaxCount:      1,
		MicroBatchSize:            1,
		TrainIters:                0,
		LR:                        1e-4,
		LRDecayStyle:              "linear",
		WeightDecay:               0.01,
		LRWSDDecayStyle:           "exponential",
		CkptFormat:                "torch_dist",
		Optimizer:                 "adam",
		SGDMomentum:               0.9,
		WeightDecayIncrStyle:      "constant",
		AdamBeta1:                 0.9,
		AdamBeta2:                 0.999,
		AdamEps:                   1e-8,
		ClipGrad:                  1.0,
		Seed:                      1234,
		LogInterval:               100,
		EvalInterval:              1000,
		EvalIters:                 100,
		Data:                      source.Data{SplitValid: 0.02},
		DistributedTimeoutMinutes: 10,
		SampleTemperature:         0.8,
		SamplePrompt:              "func ",
		Precision:                 DefaultPrecision(),
		TensorBoard:               defaultTensorBoard(),
	}
}

// trainingModel is the model config a run starts from: the config's
// defaults with gradient_accumulation_fusion on, as Megatron's training
// arguments have it (--no-gradient-accumulation-fusion turns it off)
// where its ModelParallelConfig dataclass defaults to off.
func trainingModel() config.TransformerConfig {
	m := config.DefaultTransformerConfig()
	m.GradientAccumulationFusion = true
	return m
}

// DataParallelSize returns dp = world/(tp·pp·cp).
func (a Args) DataParallelSize(world int) int {
	mp := a.Model.TensorModelParallelSize * a.Model.PipelineModelParallelSize * a.Model.ContextParallelSize
	if mp <= 0 {
		return 0
	}
	return world / mp
}

// NumMicroBatches returns the gradient-accumulation steps per iteration:
// global / (micro · dp).
func (a Args) NumMicroBatches(dp int) int { return a.GlobalBatchSize / (a.MicroBatchSize * dp) }

// Schedule returns the learning-rate schedule.
//
// With --train-samples the warmup and decay count samples (Megatron's
// sample-based schedule); --lr-warmup-fraction sets the warmup to that
// fraction of the decay, in either unit. With --step-batch-size-schedule
// and --train-iters the schedule counts samples too, each iteration of
// its flags being one of the final global batch (flagSchedule).
func (a Args) Schedule() optim.Schedule {
	s := a.flagSchedule()
	if a.stepSchedule() != nil && !s.Samples {
		g := a.GlobalBatchSize
		s.WarmupIters, s.DecayIters, s.WSDDecayIters, s.WDIncrIters = s.WarmupIters*g, s.DecayIters*g, s.WSDDecayIters*g, s.WDIncrIters*g
		if a.LRWarmupFraction > 0 {
			// The fraction of the decay's samples, as the reference's
			// f·lr_decay_steps, not of its iterations rounded first.
			s.WarmupIters = int(a.LRWarmupFraction * float64(s.DecayIters))
		}
		s.Samples = true
	}
	return s
}

// flagSchedule is the learning-rate schedule in the units of its flags:
// iterations, or samples with --train-samples. A checkpoint records it so
// (schedulerRecord).
func (a Args) flagSchedule() optim.Schedule {
	s := optim.Schedule{MaxLR: a.LR, MinLR: a.MinLR, InitLR: a.LRWarmupInit, Style: a.LRDecayStyle, WarmupIters: a.LRWarmupIters, DecayIters: a.LRDecayIters}
	if s.DecayIters == 0 {
		s.DecayIters = a.TrainIters
	}
	if a.TrainSamples > 0 {
		s.WarmupIters, s.DecayIters, s.Samples = a.LRWarmupSamples, a.LRDecaySamples, true
		if s.DecayIters == 0 {
			s.DecayIters = a.TrainSamples
		}
	}
	if a.LRWarmupFraction > 0 {
		s.WarmupIters = int(a.LRWarmupFraction * float64(s.DecayIters))
	}
	s.WSDDecayIters, s.WSDStyle, s.WDIncrIters = a.LRWSDDecayIters, a.LRWSDDecayStyle, a.TrainIters
	if s.Samples {
		s.WSDDecayIters, s.WDIncrIters = a.LRWSDDecaySamples, a.TrainSamples
	}
	if a.WeightDecayIncrIters > 0 {
		s.WDIncrIters = a.WeightDecayIncrIters
	}
	s.StartWD, s.EndWD, s.WDIncrStyle = a.WeightDecay, a.WeightDecay, a.WeightDecayIncrStyle
	if a.StartWeightDecay != nil {
		s.StartWD = *a.StartWeightDecay
	}
	if a.EndWeightDecay != nil {
		s.EndWD = *a.EndWeightDecay
	}
	return s
}

// Validate reports every problem with the settings at once, each naming
// the flag and the fix. world is the number of ranks.
//
// It is a list of small checks, each adding what it finds to one list of
// violations, in the order a reader meets the flags: the model and the
// parallel layout, numbers that must be finite, the batch, checkpoints,
// the length of the run and its schedule, the optimizer, the data.
func (a Args) Validate(world int) error {
	var v violations
	for _, check := range []func(Args, int, *violations){
		Args.checkModel, Args.checkFinite, Args.checkBatch, Args.checkProfile,
		Args.checkCounts, Args.checkGuards, Args.checkCheckpointFlags, Args.checkLength,
		Args.checkSchedule, Args.checkOptimizer, Args.checkDataAndSample, Args.checkTensorBoard,
	} {
		check(a, world, &v)
	}
	return v.err()
}

// violations collects what Validate's checks find.
type violations []string

// add appends one violation, built by fmt.Sprintf.
func (v *violations) add(format string, args ...any) { *v = append(*v, fmt.Sprintf(format, args...)) }

// flagValue is a flag and the number it was given.
type flagValue struct {
	flag  string
	value float64
}

// notNegative adds a violation for each of the flags given a negative
// number, naming it alone.
func (v *violations) notNegative(flags ...flagValue) {
	for _, f := range flags {
		if f.value < 0 {
			v.add("%s %g: must not be negative", f.flag, f.value)
		}
	}
}

// addErr appends err: each violation of a *config.ValidationError, or
// its text.
func (v *violations) addErr(err error) {
	if err == nil {
		return
	}
	if ve, ok := err.(*config.ValidationError); ok {
		for _, x := range ve.Violations {
			*v = append(*v, x.Msg)
		}
		return
	}
	*v = append(*v, err.Error())
}

// err is the "invalid arguments" error listing every violation, or nil.
func (v violations) err() error {
	switch len(v) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("invalid arguments: %s", v[0])
	}
	return fmt.Errorf("invalid arguments (%d):\n  - %s", len(v), strings.Join(v, "\n  - "))
}

// checkModel: the model and parallel configs (config's own rules), the
// world, and what gotron's model cannot do yet.
func (a Args) checkModel(world int, v *violations) {
	v.addErr(a.Model.Validate())
	v.addErr(a.DDP.Validate())
	v.addErr(config.ValidateWorld(world, a.Model.ModelParallelConfig, a.DDP))
	if n := a.DDP.NumDistributedOptimizerInstances; n > 1 && a.Model.NumMoEExperts > 0 {
		v.add("--num-distributed-optimizer-instances %d with --num-experts: the partial distributed optimizer of expert parameters is not built yet; use one instance for a MoE model", n)
	}
	v.addErr(gpt.MoEBuilt(a.Model))
	*v = append(*v, a.precisionErrors()...)
	a.checkFSDP(v)
}

// checkFSDP: what gotron's Megatron-FSDP does not combine with. The
// gradient- and parameter-sharding strategies shard every pipeline
// chunk's dense parameters over the data- and context-parallel ranks and
// a MoE chunk's experts over the expert data-parallel ranks, beside
// tensor, expert and pipeline parallelism (the reference's own FSDP mesh
// has no pipeline axis). --align-param-gather is the distributed
// optimizer's: FSDP gathers layer by layer.
func (a Args) checkFSDP(v *violations) {
	if !a.DDP.ShardsGradients() {
		return
	}
	if a.AlignParamGather != nil && *a.AlignParamGather {
		v.add("--align-param-gather with --data-parallel-sharding-strategy %s: it aligns the distributed optimizer's bucket all-gathers across pipeline stages; Megatron-FSDP gathers each layer as its pass reaches it: drop the flag", a.DDP.DataParallelShardingStrategy)
	}
}

// checkFinite: no NaN or infinity in a floating-point flag.
func (a Args) checkFinite(_ int, v *violations) {
	for _, f := range []struct {
		flag string
		x    float64
	}{
		{"--lr", a.LR}, {"--min-lr", a.MinLR}, {"--lr-warmup-init", a.LRWarmupInit}, {"--weight-decay", a.WeightDecay}, {"--clip-grad", a.ClipGrad}, {"--sgd-momentum", a.SGDMomentum},
		{"--adam-beta1", a.AdamBeta1}, {"--adam-beta2", a.AdamBeta2}, {"--adam-eps", a.AdamEps},
		{"--init-method-std", a.Model.InitMethodStd}, {"--hidden-dropout", float64(a.Model.HiddenDropout)},
		{"--attention-dropout", float64(a.Model.AttentionDropout)}, {"--norm-epsilon", float64(a.Model.LayernormEpsilon)},
		{"--sample-temperature", a.SampleTemperature}, {"--split-valid", a.SplitValid},
		{"--distributed-timeout-minutes", a.DistributedTimeoutMinutes}, {"--exit-duration-in-mins", a.ExitDurationInMins},
		{"--lr-warmup-fraction", a.LRWarmupFraction},
		{"--loss-scale", a.LossScale}, {"--initial-loss-scale", a.InitialLossScale}, {"--min-loss-scale", a.MinLossScale},
	} {
		if math.IsNaN(f.x) || math.IsInf(f.x, 0) {
			v.add("%s %g: must be a finite number", f.flag, f.x)
		}
	}
}

// rowsOK reports whether micro·dp, the rows of one microbatch over the
// data-parallel ranks, is positive and fits in an int (2⁶²·4 wraps to 0,
// and dividing by it panics).
func (a Args) rowsOK(dp int) bool {
	return a.MicroBatchSize > 0 && dp > 0 && a.MicroBatchSize <= math.MaxInt/dp
}

// checkBatch: the microbatches per iteration against the schedule, the
// batch ramp, the interleaved schedule's group size.
func (a Args) checkBatch(world int, v *violations) {
	mp := a.Model.ModelParallelConfig
	dp := a.DataParallelSize(world)
	rowsOK := a.rowsOK(dp)
	if a.MicroBatchSize > 0 && dp > 0 && !rowsOK {
		v.add("--micro-batch-size %d × data-parallel size %d is beyond any global batch: choose a smaller --micro-batch-size", a.MicroBatchSize, dp)
	}
	// (The interleaved schedule's group rule; ZB-V and DualPipeV, on the
	// V placement, have their own, in checkProfile.)
	if mp.PipelineModelParallelSize > 1 && mp.VirtualPipelineModelParallelSize > 0 && rowsOK &&
		pp.PlacementOf(a.PipelineSchedule) == config.PlacementLoop && a.StepBatchSizeSchedule == "" &&
		a.GlobalBatchSize > 0 && a.GlobalBatchSize%(a.MicroBatchSize*dp) == 0 {
		m := a.NumMicroBatches(dp)
		if err := pp.ValidateInterleaved(mp.PipelineModelParallelSize, m, mp.EffectiveMicrobatchGroupSize()); err != nil {
			v.add("--global-batch-size %d / (--micro-batch-size %d × data-parallel size %d) = %d microbatches per iteration: %v (change --global-batch-size for another number of microbatches)",
				a.GlobalBatchSize, a.MicroBatchSize, dp, m, err)
		}
	}
	a.validateRamp(dp, v.add)
	a.validateSteps(dp, v.add)
	if mp.MicrobatchGroupSizePerVPStage != 0 && mp.VirtualPipelineModelParallelSize == 0 {
		v.add("--microbatch-group-size-per-virtual-pipeline-stage %d shapes the interleaved schedule only, and --virtual-pipeline-model-parallel-size is unset: set it (with --pipeline-model-parallel-size > 1) or drop the group size",
			mp.MicrobatchGroupSizePerVPStage)
	}
}

// checkProfile: --pipeline-schedule must suit the pipeline (and
// defer_embedding_wgrad_compute);
// --profile-schedule needs a pipeline and a directory.
func (a Args) checkProfile(world int, v *violations) {
	mp := a.Model.ModelParallelConfig
	// The config's own rules refuse defer_embedding_wgrad_compute with
	// one stage or a negative limit; here only its schedule is checked,
	// with the fewest microbatches an iteration has (the first, under a
	// batch-size ramp-up; unknown, 0, when the batch flags are wrong,
	// which checkBatch reports; the smallest a step schedule reaches).
	deferEmb := mp.DeferEmbeddingWgradCompute && mp.PipelineModelParallelSize > 1 && mp.WgradDeferralLimit >= 0
	m := 0
	if dp := a.DataParallelSize(world); a.rowsOK(dp) {
		m = a.smallestBatch() / (a.MicroBatchSize * dp)
	}
	if err := (pp.Config{PP: mp.PipelineModelParallelSize, VPP: mp.VirtualPipelineModelParallelSize, Microbatches: m,
		OverlapP2PComm: mp.OverlapP2PComm, Schedule: a.PipelineSchedule, DeferEmbeddingWgrad: deferEmb,
		ExchangesShapes: mp.VariableSeqLengths}).CheckSchedule(); err != nil {
		v.addErr(err)
	}
	p := a.ProfileSchedule
	if p == "" {
		return
	}
	if n := a.Model.PipelineModelParallelSize; n < 2 {
		v.add("--profile-schedule %s draws the pipeline schedule, but --pipeline-model-parallel-size is %d: set it to 2 or more, or drop --profile-schedule", p, n)
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
		v.add("--profile-schedule %s: the directory %s does not exist: create it or choose another file", p, filepath.Dir(p))
	}
}

// checkCounts: sizes and counts that must be positive or not negative.
func (a Args) checkCounts(_ int, v *violations) {
	if a.MicroBatchSize <= 0 {
		v.add("--micro-batch-size %d: must be at least 1", a.MicroBatchSize)
	}
	if a.GlobalBatchSize < 0 {
		v.add("--global-batch-size %d: must be positive (or 0 for --micro-batch-size × data-parallel size)", a.GlobalBatchSize)
	}
	for _, x := range []struct {
		flag string
		n    int
	}{{"--lr-decay-iters", a.LRDecayIters}, {"--threads", a.Threads}, {"--exit-interval", a.ExitInterval}} {
		if x.n < 0 {
			v.add("%s %d: must not be negative (0: the default)", x.flag, x.n)
		}
	}
	if a.CkptStep < 0 {
		v.add("--ckpt-step %d: must be a saved iteration (1 or more; 0: the latest)", a.CkptStep)
	}
	if a.TimingLogLevel < 0 || a.TimingLogLevel > 2 {
		v.add("--timing-log-level %d: choose 0 (the iteration's time only), 1 (once-per-iteration operations: the pipeline pass, the optimizer) or 2 (every step and message too)", a.TimingLogLevel)
	}
	if o := a.TimingLogOption; o != "" && !slices.Contains(TimingLogOptions, o) {
		v.add("--timing-log-option %q: choose minmax (the least and the most time over the ranks), max or all (every rank's)", o)
	}
	if n := runtime.NumCPU(); a.Threads > n {
		v.add("--threads %d: this machine gives the process %d core(s): give at most %d, or 0 for all of them", a.Threads, n, n)
	}
}

// checkGuards: the run's guards — stragglers, reruns, restarts and the
// faults injected to try them.
func (a Args) checkGuards(world int, v *violations) {
	if t := a.StragglerThreshold; !(t > 0) || math.IsInf(t, 0) {
		v.add("--straggler-threshold %g: a positive fraction of the median (0.1: 10%% slower)", t)
	}
	if a.StragglerMinmaxCount < 1 {
		v.add("--straggler-minmax-count %d: at least 1", a.StragglerMinmaxCount)
	}
	if !slices.Contains(RerunModes, a.RerunMode) {
		v.add("--rerun-mode %q: choose %s", a.RerunMode, strings.Join(RerunModes, ", "))
	}
	if a.InprocessRestart && a.Save == "" {
		v.add("--inprocess-restart resumes a failed run from its newest checkpoint, and --save is not given: pass --save DIR (with --save-interval) or drop --inprocess-restart")
	}
	if a.InprocessMaxIterations < 1 {
		v.add("--inprocess-max-iterations %d: at least 1 restart", a.InprocessMaxIterations)
	}
	faults, err := ParseFaults(a.InjectFault)
	v.addErr(err)
	for _, f := range faults {
		if f.Rank >= world {
			v.add("--inject-fault %s@%d:%d: rank %d, and the run has %d ranks", f.Kind, f.Rank, f.Iter, f.Rank, world)
		}
	}
}

// checkCheckpointFlags: flags that say how to load or save need --load
// or --save; limits on waiting and exiting.
func (a Args) checkCheckpointFlags(world int, v *violations) {
	if a.Load == "" {
		for _, x := range []struct {
			flag string
			on   bool
		}{{"--ckpt-step", a.CkptStep > 0}, {"--finetune", a.Finetune}, {"--no-load-optim", a.NoLoadOptim},
			{"--no-load-rng", a.NoLoadRNG}, {"--use-checkpoint-args", a.UseCheckpointArgs},
			{"--override-opt_param-scheduler", a.OverrideOptParamScheduler}, {"--use-checkpoint-opt_param-scheduler", a.UseCheckpointOptParamScheduler},
			{"--exit-on-missing-checkpoint", a.ExitOnMissingCheckpoint}} {
			if x.on {
				v.add("%s says how to load a checkpoint, and --load is not given: pass --load DIR or drop %s", x.flag, x.flag)
			}
		}
	}
	if a.CkptFormat != "torch_dist" {
		v.add("--ckpt-format %s: gotron's checkpoints are one sharded format that any layout loads, as Megatron's torch_dist: drop the flag, or pass torch_dist", a.CkptFormat)
	}
	if a.OverrideOptParamScheduler && a.UseCheckpointOptParamScheduler {
		v.add("--override-opt_param-scheduler keeps this run's learning-rate schedule and --use-checkpoint-opt_param-scheduler takes the checkpoint's: give one")
	}
	if !a.Model.PerformInitialization && a.Load == "" {
		v.add("--no-initialization draws no initial weights, and --load is not given: the model would train from zeros: pass --load DIR or drop --no-initialization")
	}
	if a.Save == "" && (a.NoSaveOptim || a.NoSaveRNG) {
		v.add("--no-save-optim/--no-save-rng say what a checkpoint leaves out, and --save is not given: pass --save DIR or drop them")
	}
	if a.Save == "" && a.AsyncSave {
		v.add("--async-save says how checkpoints are written, and --save is not given: pass --save DIR or drop --async-save")
	}
	if a.ExitDurationInMins < 0 {
		v.add("--exit-duration-in-mins %g: must not be negative (0: no limit)", a.ExitDurationInMins)
	}
	if a.DistributedTimeoutMinutes > maxTimeoutMinutes {
		v.add("--distributed-timeout-minutes %g: at most %d (a year); a collective that waits that long has hung", a.DistributedTimeoutMinutes, maxTimeoutMinutes)
	}
	dp := a.DataParallelSize(world)
	if a.GlobalBatchSize != 0 && a.rowsOK(dp) && a.GlobalBatchSize%(a.MicroBatchSize*dp) != 0 && a.StepBatchSizeSchedule == "" {
		// (0 is Megatron's default: one micro-batch per data-parallel rank.)
		v.add("--global-batch-size %d is not divisible by --micro-batch-size × data-parallel size = %d × %d = %d: choose a global batch that is a multiple of %d",
			a.GlobalBatchSize, a.MicroBatchSize, dp, a.MicroBatchSize*dp, a.MicroBatchSize*dp)
	}
}

// checkLength: the run's length in iterations or samples, and the units
// of its learning-rate schedule.
func (a Args) checkLength(_ int, v *violations) {
	switch {
	case a.TrainSamples < 0:
		v.add("--train-samples %d: must be positive", a.TrainSamples)
	case a.TrainSamples > 0 && a.TrainIters != a.iterationsFor(int64(a.TrainSamples)):
		v.add("--train-iters %d and --train-samples %d: give one of them", a.TrainIters, a.TrainSamples)
	case a.TrainIters <= 0 && a.TrainSamples > 0 && !a.SkipTrain:
		v.add("--train-samples %d is less than the first global batch (%d): raise --train-samples to at least %d", a.TrainSamples, a.GlobalBatchAt(0), a.GlobalBatchAt(0))
	case a.TrainIters <= 0 && !a.SkipTrain:
		v.add("--train-iters %d: set the number of iterations to train (at least 1), or --train-samples", a.TrainIters)
	}
	if a.TrainSamples > 0 && (a.LRWarmupIters != 0 || a.LRDecayIters != 0) {
		v.add("--lr-warmup-iters/--lr-decay-iters with --train-samples: the schedule counts samples; use --lr-warmup-samples/--lr-decay-samples")
	}
	if a.TrainSamples == 0 && (a.LRWarmupSamples != 0 || a.LRDecaySamples != 0) {
		v.add("--lr-warmup-samples/--lr-decay-samples need --train-samples (the schedule counts iterations otherwise): use --lr-warmup-iters/--lr-decay-iters")
	}
	v.notNegative(flagValue{"--lr-warmup-samples", float64(a.LRWarmupSamples)}, flagValue{"--lr-decay-samples", float64(a.LRDecaySamples)})
	if f := a.LRWarmupFraction; f != 0 && (f < 0 || f > 1) {
		v.add("--lr-warmup-fraction %g: must lie in [0, 1]", f)
	}
	for _, w := range []flagValue{{"--lr-warmup-iters", float64(a.LRWarmupIters)}, {"--lr-warmup-samples", float64(a.LRWarmupSamples)}} {
		if a.LRWarmupFraction != 0 && w.value != 0 {
			v.add("--lr-warmup-fraction %g and %s %g both set the warmup: give one", a.LRWarmupFraction, w.flag, w.value)
		}
	}
	if a.SkipTrain && a.Load == "" {
		v.add("--skip-train evaluates a loaded model, and --load is not given: pass --load DIR")
	}
}

// checkTensorBoard: --tensorboard-dir's settings.
func (a Args) checkTensorBoard(_ int, v *violations) { a.TensorBoard.check(v) }

// checkSchedule: logging, evaluation and saving intervals, and the
// learning-rate schedule itself.
func (a Args) checkSchedule(_ int, v *violations) {
	if a.LogInterval <= 0 {
		v.add("--log-interval %d: must be at least 1", a.LogInterval)
	}
	v.notNegative(flagValue{"--eval-iters", float64(a.EvalIters)}, flagValue{"--eval-interval", float64(a.EvalInterval)},
		flagValue{"--save-interval", float64(a.SaveInterval)})
	if a.SaveInterval > 0 && a.Save == "" {
		v.add("--save-interval %d without --save: pass the checkpoint directory with --save", a.SaveInterval)
	}
	a.checkNonPersistent(v)
	a.checkWeightDecayFlags(v)
	v.addErr(a.flagSchedule().Validate())
}

// checkNonPersistent: the non-persistent checkpoints' interval, type and
// directory.
func (a Args) checkNonPersistent(v *violations) {
	switch a.NonPersistentCkptType {
	case "", "global":
	case "local", "in_memory":
		v.add("--non-persistent-ckpt-type %s keeps checkpoints on each node (NVIDIA's resiliency extension) or in memory, which gotron does not build: use global, a directory every rank writes", a.NonPersistentCkptType)
	default:
		v.add("--non-persistent-ckpt-type %q: choose global", a.NonPersistentCkptType)
	}
	switch n := a.NonPersistentSaveInterval; {
	case n < 0:
		v.add("--non-persistent-save-interval %d: must not be negative (0: none)", n)
	case n > 0 && a.Save == "" && a.NonPersistentGlobalCkptDir == "":
		v.add("--non-persistent-save-interval %d without --save or --non-persistent-global-ckpt-dir: pass the directory the non-persistent checkpoints go to", n)
	}
	if d := a.NonPersistentGlobalCkptDir; d != "" {
		for _, f := range []struct{ flag, dir string }{{"--save", a.Save}, {"--load", a.Load}} {
			if f.dir != "" && filepath.Clean(f.dir) == filepath.Clean(d) {
				v.add("--non-persistent-global-ckpt-dir %s is also %s: the non-persistent saves keep only their newest iteration and would delete the persistent ones; give it a directory of its own (the default is %s/non_persistent)", d, f.flag, f.dir)
			}
		}
	}
}

// nonPersistent reports whether the run saves or looks for non-persistent
// checkpoints: --non-persistent-ckpt-type global, or an interval without
// a type (global).
func (a Args) nonPersistent() bool {
	return a.NonPersistentCkptType == "global" || a.NonPersistentCkptType == "" && a.NonPersistentSaveInterval > 0
}

// NonPersistentDir is where non-persistent checkpoints go and are looked
// for: --non-persistent-global-ckpt-dir, or DIR/non_persistent under dir
// (--save when saving, --load when loading), as Megatron's.
func (a Args) NonPersistentDir(dir string) string {
	if a.NonPersistentGlobalCkptDir != "" {
		return a.NonPersistentGlobalCkptDir
	}
	return filepath.Join(dir, "non_persistent")
}

// checkWeightDecayFlags: --start- and --end-weight-decay go with an
// increasing weight decay and not with a constant one, and the WSD flags
// with WSD, as Megatron asserts.
func (a Args) checkWeightDecayFlags(v *violations) {
	given := a.StartWeightDecay != nil || a.EndWeightDecay != nil
	switch constant := a.WeightDecayIncrStyle == "constant"; {
	case constant && given:
		v.add("--start-weight-decay and --end-weight-decay with --weight-decay-incr-style constant: a constant weight decay is --weight-decay; drop them, or choose --weight-decay-incr-style linear or cosine")
	case !constant && (a.StartWeightDecay == nil || a.EndWeightDecay == nil):
		v.add("--weight-decay-incr-style %s moves the weight decay from --start-weight-decay to --end-weight-decay: give both", a.WeightDecayIncrStyle)
	}
	if a.LRDecayStyle != "WSD" && (a.LRWSDDecayIters != 0 || a.LRWSDDecaySamples != 0) {
		v.add("--lr-wsd-decay-iters/--lr-wsd-decay-samples set the annealing of --lr-decay-style WSD, and the style is %s: drop them, or choose WSD", a.LRDecayStyle)
	}
}

// checkOptimizer: Adam's and the clipping's ranges.
func (a Args) checkOptimizer(_ int, v *violations) {
	for _, b := range []flagValue{{"--adam-beta1", a.AdamBeta1}, {"--adam-beta2", a.AdamBeta2}} {
		if b.value < 0 || b.value >= 1 {
			v.add("%s %g: must lie in [0, 1)", b.flag, b.value)
		}
	}
	if a.AdamEps <= 0 {
		v.add("--adam-eps %g: must be positive", a.AdamEps)
	}
	v.notNegative(flagValue{"--weight-decay", a.WeightDecay}, flagValue{"--clip-grad", a.ClipGrad})
	if a.Optimizer != "adam" && a.Optimizer != "sgd" {
		v.add("--optimizer %q: choose adam or sgd", a.Optimizer)
	}
	if a.SGDMomentum < 0 || a.SGDMomentum >= 1 {
		v.add("--sgd-momentum %g: must lie in [0, 1)", a.SGDMomentum)
	}
}

// checkDataAndSample: the data flags, the held-out split, the timeout,
// and the sample generated after training.
func (a Args) checkDataAndSample(_ int, v *violations) {
	*v = append(*v, a.Data.DataErrors(a.SkipTrain)...)
	if a.SplitValid < 0 || a.SplitValid >= 1 {
		v.add("--split-valid %g: the held-out fraction must lie in [0, 1)", a.SplitValid)
	}
	if a.DistributedTimeoutMinutes <= 0 {
		v.add("--distributed-timeout-minutes %g: must be positive", a.DistributedTimeoutMinutes)
	}
	if a.Sample < 0 || a.SampleTemperature < 0 {
		v.add("--sample %d, --sample-temperature %g: the sample length must not be negative and the temperature must be at least 0 (0: greedy, the likeliest token each time)", a.Sample, a.SampleTemperature)
	}
	if n := a.Model.VocabSize; a.Sample > 0 && n > 0 && a.Tokenizer.Type == "" {
		for i := 0; i < len(a.SamplePrompt); i++ {
			if int(a.SamplePrompt[i]) >= n {
				v.add("--sample-prompt %q: byte %d (%q) is outside the vocabulary [0, %d); samples are byte-level: use --vocab-size 256, another prompt, or drop --sample",
					a.SamplePrompt, a.SamplePrompt[i], a.SamplePrompt[i:i+1], n)
				break
			}
		}
	}
}
