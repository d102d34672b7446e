package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/source"
	"github.com/gotron/gotron/train"
)

func newTrainCmd() *cobra.Command {
	a := train.DefaultArgs()
	var textPath, backend, cpuProfile string
	var tokFlags *tokenizerFlags
	var rampup []int
	var startWD, endWD float64
	var model *modelFlags // addModelFlags below
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Pretrain a GPT (Megatron's pretrain_gpt.py)",
		Long: `Pretrain a GPT with Megatron's flags.

Data: --data-path PREFIX (Megatron's indexed datasets, written by gotron
preprocess; or a blend, --data-path 0.3 A 0.7 B, divided by --split 969,30,1),
--train-data-path/--valid-data-path (a blend per split),
--mock-data (synthetic, reproducible across languages), --text-data-path PATH
(text files or directories, byte-level tokens, no preprocessing), or
--go-stdlib-corpus (the *.go files of the Go standard library on this machine).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := model.apply(); err != nil {
				return err
			}
			if textPath != "" {
				a.TextDataPath = strings.Split(textPath, ",")
			}
			var tokNote string
			a.Tokenizer, tokNote = tokFlags.options()
			if cmd.Flags().Changed("rampup-batch-size") {
				if len(rampup) != 3 {
					return fmt.Errorf("--rampup-batch-size takes three numbers, START INCREMENT SAMPLES (got %d): for example --rampup-batch-size 16 16 100000", len(rampup))
				}
				a.RampupBatchSize = data.Ramp{Start: rampup[0], Increment: rampup[1], Samples: rampup[2]}
			}
			if cmd.Flags().Changed("start-weight-decay") {
				a.StartWeightDecay = &startWD
			}
			if cmd.Flags().Changed("end-weight-decay") {
				a.EndWeightDecay = &endWD
			}
			if err := tensorBoardFlags(cmd, &a); err != nil {
				return err
			}
			if err := overlapFlags(cmd, &a); err != nil {
				return err
			}
			if err := ddpFlags(cmd, &a); err != nil {
				return err
			}
			if cmd.Flags().Changed("world-size") && a.WorldSize < 1 {
				return fmt.Errorf("--world-size %d: must be at least 1", a.WorldSize)
			}
			if backend != "local" && backend != "mpi" {
				return fmt.Errorf("--backend %q: choose local (ranks as goroutines) or mpi (one process per rank under mpirun)", backend)
			}
			if a.InprocessRestart && backend == "mpi" {
				return fmt.Errorf("--inprocess-restart runs the job again inside this process, and under --backend mpi the ranks are processes mpirun starts: drop --inprocess-restart and let the launcher restart the job from --save (e.g. Slurm's --requeue)")
			}
			if err := checkLauncher(backend); err != nil {
				return err
			}
			stop, err := startCPUProfile(cpuProfile, backend)
			if err != nil {
				return err
			}
			defer stop()
			o := train.Options{Out: os.Stdout, Stop: &train.Stop{}}
			for _, n := range []string{cmd.Annotations[noOpNote], tokNote} {
				if n != "" {
					o.Notes = append(o.Notes, n)
				}
			}
			if in := interruptsFrom(cmd.Context()); in != nil {
				note := "finishing the iteration, then exiting; nothing is saved without --save"
				if a.Save != "" {
					note = "finishing the iteration and saving to " + a.Save + ", then exiting"
				}
				in.training(o.Stop, note, backend == "mpi" && launcherRank() > 0)
			}
			if term.IsTerminal(int(os.Stderr.Fd())) {
				o.Progress = os.Stderr
			}
			var res *train.Result
			switch backend {
			case "local":
				res, err = train.Run(cmd.Context(), a, o)
			case "mpi":
				if cmd.Flags().Changed("world-size") {
					return fmt.Errorf("--world-size with --backend mpi: the world is the mpirun job (mpirun -np N); drop --world-size")
				}
				res, err = runMPI(cmd.Context(), a, o)
			}
			if err != nil {
				return err
			}
			if res == nil {
				return nil
			}
			if e := res.Exit; e != nil && e.Signal != 0 && !a.ExitSignalHandler {
				return stoppedBySignal(a, res)
			}
			if res.Sample != "" {
				fmt.Printf("\n--- sample from the trained model (%d tokens, temperature %g) ---\n%s\n--- end of sample ---\n", a.Sample, a.SampleTemperature, res.Sample)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	model = addRunFlags(f, &a)
	f.StringVar(&a.PipelineSchedule, "pipeline-schedule", "", "pipeline schedule: 1f1b (the default: 1F1B, interleaved with --virtual-pipeline-model-parallel-size), zb-h1 (zero-bubble ZB-H1: each backward split into the input gradient, sent upstream at once, and the weight gradients, deferred to fill the bubble; 1F1B's memory), zb-h2 (ZB-H2: no bubble at equal forward, input- and weight-gradient times, for up to 2P-1 microbatches' activations per stage), zb-v (ZB-V, with --virtual-pipeline-model-parallel-size 2: rank r holds stages r and 2P-1-r, the embedding and the loss on rank 0; no bubble at equal times from 2P-1 microbatches, at 1F1B's memory) or dualpipev (DeepSeek's DualPipeV on the same V, from 2P microbatches: most backwards whole, beside a forward of the other chunk); each gives the numbers of 1f1b (zb-v, dualpipev: of the interleaved 1F1B, without dropout) bit for bit")
	f.StringVar(&a.ProfileSchedule, "profile-schedule", "", "write the measured pipeline schedule of the last iteration, every rank, as an SVG timeline to this file")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run (go tool pprof) here (with --backend mpi, one per process: FILE.rankN)")
	f.Bool("overlap-p2p-communication", false, "overlap pipeline sends and receives with computation (interleaved schedule; the default there)")
	f.Bool("no-overlap-p2p-communication", false, "batch pipeline sends and receives instead of overlapping them (interleaved schedule: needs --pipeline-model-parallel-size > 2)")
	f.StringVar(&backend, "backend", "local", "local: --world-size ranks as goroutines of this process; mpi: this process is one rank of an mpirun job")
	f.IntVar(&a.MicroBatchSize, "micro-batch-size", a.MicroBatchSize, "rows per micro-batch on each rank")
	f.IntVar(&a.GlobalBatchSize, "global-batch-size", a.GlobalBatchSize, "rows per iteration over all data-parallel ranks (gradient accumulation fills the rest; 0: micro-batch-size × data-parallel size, or the last batch of --step-batch-size-schedule)")
	f.IntVar(&a.TrainIters, "train-iters", a.TrainIters, "iterations to train")
	f.IntVar(&a.TrainSamples, "train-samples", 0, "samples to train (the whole global batches that fit: train-samples / global-batch-size iterations without --rampup-batch-size); the learning-rate schedule then counts samples")
	f.IntSliceVar(&rampup, "rampup-batch-size", nil, "START INCREMENT SAMPLES: grow the global batch from START by INCREMENT up to --global-batch-size over the first SAMPLES samples (with --train-samples; as Megatron-Core up to 0.17: 0.18 on ignores it for --step-batch-size-schedule)")
	f.StringVar(&a.StepBatchSizeSchedule, "step-batch-size-schedule", "", `"THRESHOLD:BATCH ...": the global batch from each threshold of tokens consumed on (K, M, B, T: 10^3, 10^6, 10^9, 10^12; the first threshold 0), e.g. "0:16 2.4B:320 4.8B:624"; --global-batch-size is its last batch`)
	f.BoolVar(&a.SkipTrain, "skip-train", false, "with --load: train nothing, evaluate the loaded model")
	f.Float64Var(&a.LR, "lr", a.LR, "peak learning rate")
	f.Float64Var(&a.MinLR, "min-lr", a.MinLR, "learning rate at the end of decay")
	f.StringVar(&a.LRDecayStyle, "lr-decay-style", a.LRDecayStyle, "constant, linear, cosine, inverse-square-root or WSD (warmup, stable, decay: --lr-wsd-decay-iters)")
	f.IntVar(&a.LRWSDDecayIters, "lr-wsd-decay-iters", 0, "WSD: iterations of annealing at the end of the decay")
	f.IntVar(&a.LRWSDDecaySamples, "lr-wsd-decay-samples", 0, "WSD: samples of annealing at the end of the decay (with --train-samples)")
	f.StringVar(&a.LRWSDDecayStyle, "lr-wsd-decay-style", a.LRWSDDecayStyle, "WSD's annealing: exponential, linear, cosine or minus_sqrt")
	f.IntVar(&a.LRWarmupIters, "lr-warmup-iters", a.LRWarmupIters, "iterations of linear warmup")
	f.Float64Var(&a.LRWarmupInit, "lr-warmup-init", a.LRWarmupInit, "the learning rate the warmup starts from (it rises linearly to --lr)")
	f.IntVar(&a.LRDecayIters, "lr-decay-iters", a.LRDecayIters, "iterations over which the learning rate decays (0: --train-iters)")
	f.Float64Var(&a.LRWarmupFraction, "lr-warmup-fraction", 0, "warmup as a fraction of the decay (instead of --lr-warmup-iters or --lr-warmup-samples)")
	f.IntVar(&a.LRWarmupSamples, "lr-warmup-samples", 0, "samples of linear warmup (with --train-samples)")
	f.IntVar(&a.LRDecaySamples, "lr-decay-samples", 0, "samples over which the learning rate decays (with --train-samples; 0: --train-samples)")
	f.Float64Var(&a.WeightDecay, "weight-decay", a.WeightDecay, "decoupled weight decay of the 2-d weights")
	f.StringVar(&a.WeightDecayIncrStyle, "weight-decay-incr-style", a.WeightDecayIncrStyle, "constant (--weight-decay), or linear or cosine from --start-weight-decay to --end-weight-decay over the run")
	f.Float64Var(&startWD, "start-weight-decay", 0, "the weight decay at the start (with --weight-decay-incr-style linear or cosine)")
	f.Float64Var(&endWD, "end-weight-decay", 0, "the weight decay at the end of the run (with --weight-decay-incr-style linear or cosine)")
	f.StringVar(&a.Optimizer, "optimizer", a.Optimizer, "adam, or sgd (torch.optim.SGD: --sgd-momentum, the weight decay added to the gradient)")
	f.Float64Var(&a.SGDMomentum, "sgd-momentum", a.SGDMomentum, "SGD's momentum (0: none)")
	f.Float64Var(&a.AdamBeta1, "adam-beta1", a.AdamBeta1, "Adam's β1")
	f.Float64Var(&a.AdamBeta2, "adam-beta2", a.AdamBeta2, "Adam's β2")
	f.Float64Var(&a.AdamEps, "adam-eps", a.AdamEps, "Adam's ε")
	f.Float64Var(&a.ClipGrad, "clip-grad", a.ClipGrad, "clip the global gradient norm to this (0: off)")
	f.Uint64Var(&a.Seed, "seed", a.Seed, "seed of initialisation, data order and dropout")
	f.IntVar(&a.LogInterval, "log-interval", a.LogInterval, "print an iteration line every this many iterations")
	f.IntVar(&a.EvalInterval, "eval-interval", a.EvalInterval, "evaluate on held-out data every this many iterations (and at the end)")
	f.IntVar(&a.EvalIters, "eval-iters", a.EvalIters, "global batches per evaluation")
	f.StringVar(&a.Save, "save", a.Save, "checkpoint directory to save into")
	f.StringVar(&a.Load, "load", a.Load, "checkpoint directory to resume from")
	f.IntVar(&a.SaveInterval, "save-interval", a.SaveInterval, "save a checkpoint every this many iterations (and at the end)")
	f.IntVar(&a.NonPersistentSaveInterval, "non-persistent-save-interval", 0, "also save every this many iterations into the non-persistent directory, keeping only the newest there (a --load resumes from the newer)")
	f.StringVar(&a.NonPersistentCkptType, "non-persistent-ckpt-type", "", "global: non-persistent checkpoints in a directory every rank writes (the only type built; the default with an interval)")
	f.StringVar(&a.NonPersistentGlobalCkptDir, "non-persistent-global-ckpt-dir", "", "the non-persistent checkpoints' directory (default: SAVE/non_persistent when saving, LOAD/non_persistent when loading)")
	f.BoolVar(&a.AsyncSave, "async-save", false, "write checkpoint shards in the background while training goes on (training waits only while the state is copied)")
	f.BoolVar(&a.NoSaveOptim, "no-save-optim", false, "leave the optimizer state out of checkpoints")
	f.BoolVar(&a.NoSaveRNG, "no-save-rng", false, "leave the generators' states out of checkpoints")
	f.BoolVar(&a.ExitOnMissingCheckpoint, "exit-on-missing-checkpoint", false, "with --load that is also --save: stop with an error when it holds no checkpoint, instead of starting from scratch")
	f.StringVar(&a.CkptFormat, "ckpt-format", a.CkptFormat, "torch_dist: gotron's sharded checkpoints, which load at any layout (Megatron's torch_dist; no other format is built)")
	f.BoolVar(&a.OverrideOptParamScheduler, "override-opt_param-scheduler", false, "with --load: train on with this run's learning-rate schedule (--lr, --min-lr, warmup, decay, --weight-decay) where it differs from the checkpoint's")
	f.BoolVar(&a.UseCheckpointOptParamScheduler, "use-checkpoint-opt_param-scheduler", false, "with --load: take the learning-rate schedule from the checkpoint instead of the flags")
	f.BoolVar(&a.NoLoadOptim, "no-load-optim", false, "with --load: start Adam afresh (zero moments, step 0) instead of loading its state")
	f.BoolVar(&a.NoLoadRNG, "no-load-rng", false, "with --load: start the generators from --seed instead of the saved states")
	f.BoolVar(&a.Finetune, "finetune", false, "with --load: load the weights only and start at iteration 0 with a fresh optimizer")
	f.IntVar(&a.CkptStep, "ckpt-step", 0, "with --load: load this saved iteration instead of the latest")
	f.BoolVar(&a.UseCheckpointArgs, "use-checkpoint-args", false, "with --load: take the model's shape (layers, width, heads, FFN, positions, vocabulary, sequence length) and options (normalization, activation, biases, attention groups, position embedding, untied output layer, experts and routing) from the checkpoint")
	f.BoolVar(&a.ExitSignalHandler, "exit-signal-handler", false, "on SIGTERM or SIGINT, finish the iteration, save (with --save) and exit with status 0 on every rank; a second signal exits at once")
	f.IntVar(&a.ExitInterval, "exit-interval", 0, "stop (and save) when the iteration is a multiple of this")
	f.Float64Var(&a.ExitDurationInMins, "exit-duration-in-mins", 0, "stop (and save) after the first iteration that ends this many minutes after training began")
	f.BoolVar(&a.MockData, "mock-data", false, "train on synthetic mock data")
	f.StringSliceVar(&a.DataPath, "data-path", nil, "indexed datasets (PREFIX of PREFIX.bin/.idx, see gotron preprocess): one prefix, or a blend: W1 P1 W2 P2 ... (or P1 P2 ..., weighted by size)")
	f.StringVar(&a.Split, "split", "", "train,valid,test proportions of the --data-path documents (default "+source.DefaultSplit+")")
	f.StringSliceVar(&a.TrainDataPath, "train-data-path", nil, "the training blend, instead of splitting --data-path")
	f.StringSliceVar(&a.ValidDataPath, "valid-data-path", nil, "the validation blend")
	f.StringSliceVar(&a.TestDataPath, "test-data-path", nil, "refused: gotron evaluates no test split")
	f.StringVar(&a.DataCachePath, "data-cache-path", "", "directory for the cached sample indices (default: beside the first dataset, cache/GPTDataset_indices)")
	f.BoolVar(&a.ResetPositionIDs, "reset-position-ids", false, "restart the position ids after each end-of-document token")
	f.BoolVar(&a.ResetAttentionMask, "reset-attention-mask", false, "do not attend across end-of-document tokens")
	f.BoolVar(&a.EODMaskLoss, "eod-mask-loss", false, "leave the end-of-document tokens out of the loss")
	tokFlags = addTokenizerFlags(f)
	f.StringVar(&textPath, "text-data-path", "", "text files or directories (comma-separated), trained on as byte-level tokens without preprocessing")
	f.BoolVar(&a.GoStdlibCorpus, "go-stdlib-corpus", false, "train on the Go standard library's source (go env GOROOT)/src, byte-level")
	f.Float64Var(&a.SplitValid, "split-valid", a.SplitValid, "fraction of text files held out for validation (--text-data-path, --go-stdlib-corpus)")
	f.StringVar(&a.LoadInit, "load-init", "", "initial weights (safetensors, Megatron names)")
	f.StringVar(&a.DumpGrads, "dump-grads", "", "write the first iteration's gradients (safetensors, whole tensors) here; every rank writes its pieces to FILE.parts first (under mpirun across machines, on a shared file system)")
	f.StringVar(&a.LogJSON, "log-json", "", "write one JSON object per iteration here")
	f.BoolVar(&a.LogThroughput, "log-throughput", false, "add the model TFLOP/s per rank to each iteration line (Megatron's throughput per GPU)")
	f.BoolVar(&a.LogParamsNorm, "log-params-norm", false, "add the updated parameters' global L2 norm to each iteration line, --log-json (params_norm) and TensorBoard (params-norm)")
	f.IntVar(&a.TimingLogLevel, "timing-log-level", 0, "report, after each iteration line, the time per iteration of the timers at this level or below: 0 none, 1 the pipeline pass (forward-backward) and the optimizer, 2 also each forward, backward and pipeline message")
	f.StringVar(&a.RerunMode, "rerun-mode", a.RerunMode, "disabled; validate_results: an iteration in which a rank's local loss is NaN or Inf runs again before its optimizer step, and the bitwise comparison tells a fault of the machine (the rerun differs) from a divergence (it does not); report_stats: run every iteration twice and report how often they differ")
	f.StringVar(&a.InjectFault, "inject-fault", "", "faults for tests and drills, KIND@RANK:ITER,...: kill (the rank fails before the iteration), hang (it stops there), slow=F (its forward computations take F times as long from there on), nan (its first token loss of micro-batch 0 is NaN), bitflip (a bit of it flips, in the first run only); each happens once per job")
	f.BoolVar(&a.InprocessRestart, "inprocess-restart", false, "when a rank fails, run the job again in this process from the newest checkpoint in --save (ranks as goroutines only)")
	f.IntVar(&a.InprocessMaxIterations, "inprocess-max-iterations", a.InprocessMaxIterations, "--inprocess-restart: the most restarts")
	f.IntVar(&a.InprocessMaxIterations, "max-restarts", a.InprocessMaxIterations, "the same as --inprocess-max-iterations")
	f.BoolVar(&a.LogStraggler, "log-straggler", false, "every --log-interval iterations, name the ranks slower than the median in a timed phase (forward-backward, optimizer; with --timing-log-level 2 each step and message) by more than --straggler-threshold")
	f.Float64Var(&a.StragglerThreshold, "straggler-threshold", a.StragglerThreshold, "--log-straggler: how much slower than the median a rank must be to be named, a fraction (0.1: 10%)")
	f.IntVar(&a.StragglerMinmaxCount, "straggler-minmax-count", a.StragglerMinmaxCount, "--log-straggler: the most ranks named per phase, the slowest first")
	f.StringVar(&a.TimingLogOption, "timing-log-option", "minmax", "how --timing-log-level reports a timer over the ranks: minmax (the least and the most), max, or all (every rank's)")
	f.BoolVar(&a.LogNumZerosInGrad, "log-num-zeros-in-grad", false, "add the number of zero elements of the gradients to each iteration line, --log-json (num_zeros) and TensorBoard (num-zeros)")
	addTensorBoardFlags(f, &a.TensorBoard)
	f.IntVar(&a.Threads, "threads", 0, "cores to use (0: all)")
	f.IntVar(&a.Sample, "sample", 0, "after training, generate this many tokens of text (bytes of byte-level text)")
	f.StringVar(&a.SamplePrompt, "sample-prompt", a.SamplePrompt, "text the sample starts from")
	f.Float64Var(&a.SampleTemperature, "sample-temperature", a.SampleTemperature, "sampling temperature (0: greedy, the likeliest token each time)")
	return cmd
}

// stoppedBySignal is the command's error for a run a signal stopped
// without --exit-signal-handler: status 128+signal, and what was saved.
func stoppedBySignal(a train.Args, res *train.Result) error {
	s := res.Exit.Signal
	it := res.StartIteration + len(res.Losses)
	what := "nothing was saved (no --save)"
	if res.Saved > 0 {
		what = fmt.Sprintf("its checkpoint is in %s: resume with --load %s", a.Save, a.Save)
	}
	return &exitError{code: 128 + int(s), msg: fmt.Sprintf("stopped by %s after iteration %d; %s (with --exit-signal-handler a signal ends the run with status 0)", name(s), it, what)}
}

// addModelFlags adds the model's flags; the returned flags' apply reads
// those that depend on one another into m once parsed.
func addModelFlags(f *pflag.FlagSet, m *config.TransformerConfig) *modelFlags {
	f.IntVar(&m.NumLayers, "num-layers", m.NumLayers, "transformer layers")
	f.IntVar(&m.HiddenSize, "hidden-size", m.HiddenSize, "model width")
	f.IntVar(&m.NumAttentionHeads, "num-attention-heads", m.NumAttentionHeads, "attention heads")
	f.IntVar(&m.FFNHiddenSize, "ffn-hidden-size", m.FFNHiddenSize, "MLP width (0: 4 × hidden size; with --swiglu, 4·h·2/3 rounded down to a multiple of 64)")
	f.IntVar(&m.SeqLength, "seq-length", m.SeqLength, "sequence length")
	f.IntVar(&m.MaxPositionEmbeddings, "max-position-embeddings", m.MaxPositionEmbeddings, "learned positions (0: seq length)")
	f.IntVar(&m.VocabSize, "vocab-size", m.VocabSize, "vocabulary size (mock data; 256 for byte-level text)")
	f.Float32Var(&m.HiddenDropout, "hidden-dropout", m.HiddenDropout, "dropout after attention and MLP outputs and on embeddings")
	f.Float32Var(&m.AttentionDropout, "attention-dropout", m.AttentionDropout, "dropout on attention probabilities")
	f.Float64Var(&m.InitMethodStd, "init-method-std", m.InitMethodStd, "standard deviation of weight initialisation")
	f.BoolVar(&m.InitMethodXavierUniform, "init-method-xavier-uniform", false, "draw the weights from Xavier's uniform U(−a, a), a = sqrt(6/(fan_in + fan_out)), instead of N(0, --init-method-std)")
	f.Float32Var(&m.LayernormEpsilon, "layernorm-epsilon", m.LayernormEpsilon, "ε of every LayerNorm/RMSNorm (the same setting as --norm-epsilon)")
	f.BoolVar(&m.CalculatePerTokenLoss, "calculate-per-token-loss", m.CalculatePerTokenLoss, "normalise the loss by the global batch's token count")
	f.IntVar(&m.MakeVocabSizeDivisibleBy, "make-vocab-size-divisible-by", m.MakeVocabSizeDivisibleBy, "pad the vocabulary to a multiple of this × the tensor-parallel size (padding changes no loss or gradient)")
	return addModelOptionFlags(f, m)
}

// addRunFlags adds the flags that say what a run trains and on which
// layout, gotron train's and gotron plan's alike: the model, recompute
// and the parallel sizes with the data-parallel and precision flags.
func addRunFlags(f *pflag.FlagSet, a *train.Args) *modelFlags {
	model := addModelFlags(f, &a.Model)
	addRecomputeFlags(f, &a.Model)
	addParallelFlags(f, a)
	return model
}

// recomputeActivations is --recompute-activations, Megatron's shorthand
// for --recompute-granularity selective.
type recomputeActivations struct{ m *config.TransformerConfig }

func (r recomputeActivations) String() string {
	if r.m != nil && r.m.RecomputeGranularity == "selective" {
		return "true"
	}
	return "false"
}

func (r recomputeActivations) Set(s string) error {
	switch s {
	case "true":
		r.m.RecomputeGranularity = "selective"
	case "false":
	default:
		return fmt.Errorf("--recompute-activations=%s: true or false", s)
	}
	return nil
}

func (recomputeActivations) Type() string { return "bool" }

// addRecomputeFlags adds the activation-recompute flags.
func addRecomputeFlags(f *pflag.FlagSet, m *config.TransformerConfig) {
	f.Var(recomputeActivations{m}, "recompute-activations", "selective activation recompute (the attention core): --recompute-granularity selective")
	f.Lookup("recompute-activations").NoOptDefVal = "true"
	f.StringVar(&m.RecomputeGranularity, "recompute-granularity", m.RecomputeGranularity, "activation recompute: full (whole layers) or selective (the attention core); empty: none")
	f.StringVar(&m.RecomputeMethod, "recompute-method", m.RecomputeMethod, "with full recompute: uniform (chunks of --recompute-num-layers layers) or block (the first --recompute-num-layers layers)")
	f.IntVar(&m.RecomputeNumLayers, "recompute-num-layers", m.RecomputeNumLayers, "layers per recomputed chunk (uniform) or recomputed layers per stage (block)")
	f.BoolVar(&m.DistributeSavedActivations, "distribute-saved-activations", m.DistributeSavedActivations, "with full recompute, keep each recomputed chunk's input split across the tensor-parallel ranks")
}

func addParallelFlags(f *pflag.FlagSet, a *train.Args) {
	f.IntVar(&a.WorldSize, "world-size", a.WorldSize, "ranks, run as goroutines of this process")
	f.IntVar(&a.Model.TensorModelParallelSize, "tensor-model-parallel-size", a.Model.TensorModelParallelSize, "tensor-parallel size: attention heads, MLP and vocabulary split across this many ranks")
	f.BoolVar(&a.Model.SequenceParallel, "sequence-parallel", a.Model.SequenceParallel, "split the layer-norm and dropout regions along the sequence across the tensor-parallel ranks")
	f.IntVar(&a.Model.PipelineModelParallelSize, "pipeline-model-parallel-size", a.Model.PipelineModelParallelSize, "pipeline-parallel size: the layers split into this many stages, run under the 1F1B schedule")
	addPipelineFlags(f, &a.Model)
	f.IntVar(&a.Model.ContextParallelSize, "context-parallel-size", a.Model.ContextParallelSize, "context-parallel size: every sequence is split over this many ranks (2·cp chunks, load-balanced)")
	f.StringSliceVar(&a.Model.CPCommType, "cp-comm-type", nil, "how attention crosses the context-parallel ranks: p2p (ring, default), all_gather, a2a or a2a+p2p; one for every layer or one per layer")
	f.IntSliceVar(&a.Model.HierarchicalContextParallelSizes, "hierarchical-context-parallel-sizes", nil, "A P: the all-to-all and ring sizes of a2a+p2p context parallelism (A·P = --context-parallel-size)")
	f.IntVar(&a.Model.ExpertModelParallelSize, "expert-model-parallel-size", a.Model.ExpertModelParallelSize, "expert-parallel size ep: each MoE layer's experts split over this many ranks (--num-experts / ep each), tokens dispatched to them by --moe-token-dispatcher-type")
	f.IntVar(&a.Model.ExpertTensorParallelSize, "expert-tensor-parallel-size", a.Model.ExpertTensorParallelSize, "expert tensor-parallel size: each expert's MLP split over this many ranks (0: --tensor-model-parallel-size)")
	f.Float64Var(&a.DistributedTimeoutMinutes, "distributed-timeout-minutes", a.DistributedTimeoutMinutes, "fail a collective that waits longer than this")
	addDDPFlags(f, a)
}

// addPipelineFlags adds the flags that place layers on pipeline stages and
// shape the schedule (the training flags add --overlap-p2p-communication).
func addPipelineFlags(f *pflag.FlagSet, m *config.TransformerConfig) {
	f.IntVar(&m.VirtualPipelineModelParallelSize, "virtual-pipeline-model-parallel-size", m.VirtualPipelineModelParallelSize, "model chunks per pipeline rank: the interleaved 1F1B schedule (0: not interleaved)")
	f.IntVar(&m.NumLayersPerVirtualPipelineStage, "num-layers-per-virtual-pipeline-stage", m.NumLayersPerVirtualPipelineStage, "decoder layers per model chunk; sets the virtual pipeline size")
	f.BoolVar(&m.OverlapP2PCommWarmupFlush, "overlap-p2p-communication-warmup-flush", m.OverlapP2PCommWarmupFlush, "also overlap pipeline communication in the warmup and flush phases (interleaved schedule with overlapped communication)")
	f.IntVar(&m.MicrobatchGroupSizePerVPStage, "microbatch-group-size-per-virtual-pipeline-stage", m.MicrobatchGroupSizePerVPStage, "consecutive microbatches per virtual stage in the interleaved schedule (0: the pipeline size)")
	f.StringVar(&m.PipelineModelParallelLayout, "pipeline-model-parallel-layout", m.PipelineModelParallelLayout, `layers per stage, e.g. "Et|tt|tL" or "E|(tt|)*3,L": E embedding, t decoder layer, L loss, | between stages`)
	f.IntVar(&m.NumLayersInFirstPipelineStage, "decoder-first-pipeline-num-layers", m.NumLayersInFirstPipelineStage, "decoder layers on the first pipeline stage (0: even split)")
	f.IntVar(&m.NumLayersInLastPipelineStage, "decoder-last-pipeline-num-layers", m.NumLayersInLastPipelineStage, "decoder layers on the last pipeline stage (0: even split)")
	f.BoolVar(&m.AccountForEmbeddingInPipelineSplit, "account-for-embedding-in-pipeline-split", m.AccountForEmbeddingInPipelineSplit, "count the embedding as a layer when splitting layers evenly over stages")
	f.BoolVar(&m.AccountForLossInPipelineSplit, "account-for-loss-in-pipeline-split", m.AccountForLossInPipelineSplit, "count the loss as a layer when splitting layers evenly over stages")
	f.BoolVar(&m.DeferEmbeddingWgradCompute, "defer-embedding-wgrad-compute", m.DeferEmbeddingWgradCompute, "defer the last stage's output-layer weight-gradient GEMMs to the pipeline flush (1F1B and interleaved; the same numbers bit for bit)")
	f.IntVar(&m.WgradDeferralLimit, "wgrad-deferral-limit", m.WgradDeferralLimit, "with --defer-embedding-wgrad-compute, defer the last this many microbatches (0: all)")
	f.BoolVar(&m.DelayWgradCompute, "delay-wgrad-compute", m.DelayWgradCompute, "refused: Megatron delays weight gradients behind the expert-parallel all-to-all overlap, which gotron does not build (--pipeline-schedule zb-h1 or zb-h2 defers every weight gradient instead)")
}

// overlapFlags reads --overlap-p2p-communication and
// --no-overlap-p2p-communication into a.OverlapP2PComm.
func overlapFlags(cmd *cobra.Command, a *train.Args) error {
	f := cmd.Flags()
	on, off := f.Changed("overlap-p2p-communication"), f.Changed("no-overlap-p2p-communication")
	if on && off {
		return fmt.Errorf("--overlap-p2p-communication and --no-overlap-p2p-communication contradict each other: give one")
	}
	if on {
		v, _ := f.GetBool("overlap-p2p-communication")
		a.OverlapP2PComm = &v
	}
	if off {
		v, _ := f.GetBool("no-overlap-p2p-communication")
		v = !v
		a.OverlapP2PComm = &v
	}
	return nil
}

// addTensorBoardFlags adds --tensorboard-dir and its family, Megatron's
// names and defaults.
func addTensorBoardFlags(f *pflag.FlagSet, tb *train.TensorBoard) {
	f.StringVar(&tb.Dir, "tensorboard-dir", "", "write TensorBoard event files here (Megatron's scalars: lm loss, learning-rate, grad-norm, loss-scale, batch-size, validation loss, …)")
	f.IntVar(&tb.LogInterval, "tensorboard-log-interval", tb.LogInterval, "write the iteration scalars every this many iterations")
	f.IntVar(&tb.QueueSize, "tensorboard-queue-size", tb.QueueSize, "events kept in memory before the event file is flushed")
	f.BoolVar(&tb.LogTimers, "log-timers-to-tensorboard", false, "also write iteration-time (seconds)")
	f.BoolVar(&tb.LogValidationPPL, "log-validation-ppl-to-tensorboard", false, "also write the validation perplexity")
	f.BoolVar(&tb.LogMemory, "log-memory-to-tensorboard", false, "also write the process's memory: the live heap, what Go's runtime holds, the peak resident set, the live heap objects")
	f.BoolVar(&tb.LogWorldSize, "log-world-size-to-tensorboard", false, "also write world-size")
	f.BoolVar(&tb.LogLossScale, "log-loss-scale-to-tensorboard", tb.LogLossScale, "write loss-scale (on by default)")
	f.Bool("no-log-loss-scale-to-tensorboard", false, "do not write loss-scale")
}

// tensorBoardFlags reads --no-log-loss-scale-to-tensorboard into
// a.TensorBoard, refusing it beside --log-loss-scale-to-tensorboard.
func tensorBoardFlags(cmd *cobra.Command, a *train.Args) error {
	f := cmd.Flags()
	if !f.Changed("no-log-loss-scale-to-tensorboard") {
		return nil
	}
	if f.Changed("log-loss-scale-to-tensorboard") {
		return fmt.Errorf("--log-loss-scale-to-tensorboard and --no-log-loss-scale-to-tensorboard contradict each other: give one")
	}
	off, _ := f.GetBool("no-log-loss-scale-to-tensorboard")
	a.TensorBoard.LogLossScale = !off
	return nil
}
