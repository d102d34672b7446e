package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/pp"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/dnnl"
)

// Options say where a run's output goes.
type Options struct {
	// Out receives the iteration and validation lines (rank 0's).
	Out io.Writer
	// Progress, if set, receives a progress bar (a terminal).
	Progress io.Writer
	// Stop, if set, lets a signal handler end the run after the current
	// iteration (with a save when --save is given); see Stop.
	Stop *Stop
	// Notes are lines rank 0 prints after its start-up line (the command
	// line's, such as the Megatron flags it accepted and ignores).
	Notes []string
}

// Result is what a run reports (rank 0's view).
type Result struct {
	// Losses holds the training loss of each iteration run, in order.
	Losses []float64
	// MTPLosses holds each iteration's multi-token-prediction depths'
	// losses ("mtp_k loss"), nil without MTP.
	MTPLosses [][]float64
	// GradNorms holds each iteration's gradient norm before clipping (NaN
	// for an iteration whose step was skipped).
	GradNorms []float64
	// ParamsNorms and NumZeros hold each iteration's --log-params-norm and
	// --log-num-zeros-in-grad figures (NaN when not asked for, or for
	// zeros when the step was skipped).
	ParamsNorms, NumZeros []float64
	// Skipped counts the iterations whose optimizer step a non-finite
	// gradient skipped (fp16's dynamic loss scaling).
	Skipped int
	// ValidLoss is the last validation loss (NaN if none was computed).
	ValidLoss float64
	// Sample is the text generated after training (empty if none).
	Sample string
	// StartIteration is the iteration the run resumed from.
	StartIteration int
	// Exit, when set, says why the run stopped before --train-iters (a
	// signal, --exit-interval, --exit-duration-in-mins).
	Exit *ExitReason
	// Saved is the iteration of the last checkpoint the run wrote (0:
	// none).
	Saved int
	// Restarts counts --inprocess-restart's restarts before this run.
	Restarts int
}

// Run trains with a.WorldSize ranks as goroutines of this process. Under
// --inprocess-restart a run whose ranks fail after they started is run
// again, from the newest checkpoint this job saved (in --save or its
// non-persistent directory) or else from its own start, up to
// InprocessMaxIterations times, holding the --save lock throughout;
// Result.Restarts counts the restarts and the Result is the last run's.
func Run(ctx context.Context, a Args, o Options) (*Result, error) {
	if a.WorldSize < 1 {
		return nil, fmt.Errorf("invalid arguments: --world-size %d: must be at least 1", a.WorldSize)
	}
	pl := Placement{World: a.WorldSize, Machine: a.WorldSize, Process: a.WorldSize, Lock: true}
	if !a.InprocessRestart {
		res, started, err := runOnce(ctx, a, o, pl, nil)
		if started {
			err = withResumeHint(a, err)
		}
		return res, err
	}
	// The first attempt's Prepare takes the locks (and refuses a run
	// already holding them); the job keeps them until its last attempt.
	before := savedIterations(a)
	var held *Prepared
	defer func() {
		if held != nil {
			held.Close()
		}
	}()
	res, started, err := runOnce(ctx, a, o, pl, &held)
	pl.Lock = false
	var nr noRestart
	for n := 1; err != nil && started && ctx.Err() == nil && !o.stopRequested() && !errors.As(err, &nr) && n <= a.InprocessMaxIterations; n++ {
		b, from := restartArgs(a, before)
		if o.Out != nil {
			fmt.Fprintf(o.Out, "gotron: in-process restart %d of %d %s, after: %v\n", n, a.InprocessMaxIterations, from, err)
		}
		b.restarted = true
		res, started, err = runOnce(ctx, b, o, pl, nil)
		if res != nil {
			res.Restarts = n
		}
	}
	if started {
		err = withResumeHint(a, err)
	}
	return res, err
}

// stopRequested reports whether a signal asked the run to stop (then a
// failure is not restarted: the user wants the job to end).
func (o Options) stopRequested() bool {
	if o.Stop == nil {
		return false
	}
	_, ok := o.Stop.Requested()
	return ok
}

// savedIterations returns the newest iterations in --save and in its
// non-persistent directory (0: none).
func savedIterations(a Args) [2]int {
	var out [2]int
	for i, dir := range []string{a.Save, a.NonPersistentDir(a.Save)} {
		if dir == "" || i == 1 && a.NonPersistentSaveInterval <= 0 {
			continue
		}
		if it, err := ckpt.Latest(dir); err == nil {
			out[i] = it
		}
	}
	return out
}

// restartArgs are a's for an in-process restart, and where it starts
// from: the newest checkpoint this job saved (before are the newest
// iterations --save and its non-persistent directory held when it
// started), whole (optimizer, generators, data position), else a itself.
func restartArgs(a Args, before [2]int) (Args, string) {
	now := savedIterations(a)
	dir, it := "", 0
	for i, d := range []string{a.Save, a.NonPersistentDir(a.Save)} {
		if now[i] > before[i] && now[i] > it { // one of this job's
			dir, it = d, now[i]
		}
	}
	if dir == "" {
		return a, "from the job's start (it saved no checkpoint yet)"
	}
	// That directory's iteration, whatever the other holds.
	a.Load, a.CkptStep, a.Finetune, a.NoLoadOptim, a.NoLoadRNG = dir, it, false, false, false
	return a, fmt.Sprintf("from %s (iteration %d)", dir, it)
}

// runOnce is one run of Run; started says the ranks started (an error
// before, from the arguments, the data or the machine, is not one a
// restart mends).
//
// With keep, the prepared run (its locks) is the caller's to close.
func runOnce(ctx context.Context, a Args, o Options, pl Placement, keep **Prepared) (_ *Result, started bool, _ error) {
	p, err := Prepare(a, o, pl)
	if err != nil {
		return nil, false, err
	}
	if keep != nil {
		*keep = p
	} else {
		defer p.Close()
	}
	world := local.NewWorld(a.WorldSize, comm.Options{Timeout: timeout(p.a)})
	results := make([]*Result, a.WorldSize)
	err = world.Run(ctx, func(ctx context.Context, g comm.Group) error {
		r, err := runRank(ctx, g, p, o)
		results[g.Rank()] = r
		return err
	})
	if err != nil {
		return nil, true, rootCause(ctx, err, a.WorldSize)
	}
	return results[0], true, nil
}

// lockSave takes the lock of a directory the run saves into (flag names
// it: --save, or a non-persistent one of its own) for the run's life
// (ckpt.LockDir): a second run saving there is refused at start-up,
// naming the first, instead of the two replacing each other's
// checkpoints. A lock left by a run that is gone is taken over, with a
// note on o.Out.
func lockSave(flag, dir string, o Options) (*ckpt.Lock, error) {
	if dir == "" {
		return nil, nil
	}
	l, prev, err := ckpt.LockDir(dir)
	if err != nil {
		return nil, err
	}
	if prev != nil && o.Out != nil {
		fmt.Fprintf(o.Out, "gotron: note: %s %s was locked by a run that is gone (%s): taking it over\n", flag, dir, prev)
	}
	return l, nil
}

// DecideKernels settles, before any rank works, how this process's
// bfloat16 GEMMs run when bf16 is asked for (dnnl.Plan measures the
// kernels once, undisturbed by the ranks), and refuses an unusable
// GOTRON_BF16_GEMM up front. Prepare calls it; so does a program that
// runs bf16 GEMMs without a run (gotron bench --gemm).
func DecideKernels(bf16 bool) error {
	if !bf16 {
		return nil
	}
	if _, err := dnnl.Plan(); err != nil {
		return fmt.Errorf("invalid environment: %w", err)
	}
	return nil
}

// rootCause returns the error of a run in which one rank failed and the
// others stopped because of it (a peer's failure, or the cancellation of
// the world's context it causes while ctx is live) as that rank's error
// ("rank 2: …", or the error alone on one rank): the in-process world's
// report adds nothing a user needs. Other errors are returned as they are.
func rootCause(ctx context.Context, err error, world int) error {
	var re *local.RunError
	if !errors.As(err, &re) {
		return err
	}
	if same := sameError(re.Errs); same != nil {
		return same // every rank said the same (a check shared over the ranks)
	}
	for r, e := range re.Errs {
		var pe *comm.PeerError
		consequence := e == nil || r == re.Rank || errors.As(e, &pe) || errors.Is(e, context.Canceled) && ctx.Err() == nil
		if !consequence {
			return err // several ranks failed of their own
		}
	}
	if world == 1 {
		return re.Err
	}
	return fmt.Errorf("rank %d: %w", re.Rank, re.Err)
}

// sameError returns the error every failed rank returned when they all
// returned the same message and several failed, else nil.
func sameError(errs []error) error {
	var first error
	n := 0
	for _, e := range errs {
		switch {
		case e == nil:
		case first == nil:
			first, n = e, 1
		case e.Error() != first.Error():
			return nil
		default:
			n++
		}
	}
	if n < 2 {
		return nil
	}
	return first
}

// RunRank runs one rank of a training job on its world group; under mpirun
// every process calls it. localRanks is how many ranks share this process
// (the cores are divided among them). Rank 0 takes the lock of --save; the
// others learn of its refusal at their first collective.
func RunRank(ctx context.Context, world comm.Group, a Args, o Options, localRanks int) (*Result, error) {
	p, err := Prepare(a, o, Placement{World: world.Size(), Machine: localRanks, Process: 1, Lock: world.Rank() == 0})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	res, err := runRank(ctx, world, p, o)
	return res, withResumeHint(a, err)
}

// withResumeHint adds to the error of a run whose ranks failed where its
// newest checkpoint is and how to resume from it, when --save holds one.
func withResumeHint(a Args, err error) error {
	if err == nil || a.Save == "" || errors.Is(err, context.Canceled) {
		return err
	}
	now := savedIterations(a)
	dir, it := a.Save, now[0]
	if now[1] > now[0] {
		dir, it = a.NonPersistentDir(a.Save), now[1]
	}
	if it == 0 {
		return err
	}
	return fmt.Errorf("%w\nthe newest checkpoint is iteration %d in %s: resume with --load %s", err, it, dir, dir)
}

// runRank runs one rank of the prepared run.
func runRank(ctx context.Context, world comm.Group, p *Prepared, o Options) (_ *Result, err error) {
	a := p.a
	r := &rankRun{a: a, o: o, started: time.Now()}
	if world.Rank() == 0 {
		out := o.Out
		if out == nil {
			out = io.Discard
		}
		if r.log, err = newLogger(out, o.Progress, a, world.Size()); err != nil {
			return nil, err
		}
		defer func() {
			if cerr := r.log.close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
	}
	t, err := newTrainer(ctx, world, a, p.data, p.place.Machine, p.gc)
	if err != nil {
		return nil, err
	}
	defer t.saver.Abandon()
	r.t, r.res = t, &Result{ValidLoss: math.NaN(), StartIteration: t.iteration}
	r.startup(world.Size(), p.data.Desc)
	t.onSaved = r.saved
	if t.iteration >= a.TrainIters && !a.SkipTrain && r.log != nil {
		r.log.printf("gotron: nothing to train: the checkpoint is at iteration %d and --train-iters is %d; raise --train-iters to train on\n", t.iteration, a.TrainIters)
	}
	for t.iteration < a.TrainIters && !a.SkipTrain {
		if err := ctx.Err(); err != nil {
			return r.res, err
		}
		if stop, err := r.iterate(ctx); err != nil || stop {
			return r.res, err
		}
	}
	return r.res, r.finish(ctx, world.Rank())
}

// rankRun is one rank's run once its trainer is built: rank 0's logger
// (nil on the others) and the result it fills.
type rankRun struct {
	a       Args
	o       Options
	t       *trainer
	log     *logger
	res     *Result
	started time.Time
	// timedIters counts the iterations the timers have run since their
	// last report (--timing-log-level).
	timedIters int
	spiky      spikyCheck
}

// SpikyLossFactor and spikyLossSamples are --check-for-spiky-loss's rule,
// the reference's (pretrain_gpt.py's SPIKY_LOSS_FACTOR and
// RerunStateMachine.is_unexpectedly_large's sample of 100 values).
const (
	SpikyLossFactor  = 10
	spikyLossSamples = 100
)

// spikyCheck is --check-for-spiky-loss's record of the losses.
type spikyCheck struct {
	n   int
	max float64 // the largest |loss| of the first spikyLossSamples
}

// spike reports whether loss is at least SpikyLossFactor times the largest
// |loss| of the first spikyLossSamples finite ones (which it records, and
// which never spike). NaN and infinity are --check-for-nan-in-loss-and-grad's.
func (c *spikyCheck) spike(loss float64) bool {
	v := math.Abs(loss)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return false
	case c.n < spikyLossSamples:
		c.n++
		c.max = max(c.max, v)
		return false
	}
	return v >= c.max*SpikyLossFactor
}

// startup prints rank 0's start-up lines: the model, precision, layout,
// batch, data and kernels; the bf16 plan; a kernel warning; the resume.
func (r *rankRun) startup(world int, data string) {
	a, t, log := r.a, r.t, r.log
	if log == nil {
		return
	}
	shape := ""
	if d := a.Model.OptionsDesc(); d != "" {
		shape = " (" + d + ")"
	}
	log.printf("gotron: %d parameters%s, %s; world %d (%s, %s); %s; GEMM %s, %d thread(s) per rank\n",
		gpt.NumParameters(a.Model), shape, t.precisionDesc(), world, layoutDesc(a, t.dp), batchDesc(a, t.dp), data, tensor.GemmLibraries(), t.workers)
	for _, n := range r.o.Notes {
		log.printf("gotron: %s\n", n)
	}
	if p, err := dnnl.Plan(); err == nil && a.Model.BF16 {
		log.printf("gotron: %s\n", p)
	}
	if w := tensor.GemmWarning(); w != "" {
		log.printf("gotron: warning: %s\n", w)
	}
	if collectionOff() {
		log.printf("gotron: note: Go's collector is off (GOGC=off): the heap keeps every iteration's garbage until the memory limit, which costs time and memory; unset GOGC to collect once an iteration\n")
	}
	if t.iteration > 0 {
		log.printf("gotron: resumed from %s at iteration %d\n", t.loadedFrom, t.iteration)
	}
	if t.freshStart {
		log.printf("gotron: --load %s holds no checkpoint yet (it is also --save): starting from scratch\n", a.Load)
	}
}

// saved records and reports a checkpoint written at iteration it.
func (r *rankRun) saved(it int) {
	r.res.Saved = it
	if r.log != nil {
		r.log.printf("gotron: saved checkpoint at iteration %d to %s\n", it, r.a.Save)
	}
}

// validate evaluates on the held-out data and logs the loss.
func (r *rankRun) validate(ctx context.Context) error {
	v, err := r.t.evaluate(ctx)
	if err != nil {
		return err
	}
	r.res.ValidLoss = v
	if r.log != nil && !math.IsNaN(v) {
		return r.log.validation(r.t.iteration, v, r.t.consumed)
	}
	return nil
}

// iterate runs and reports one iteration, then what follows it:
// validation, a save, and an exit (stop true) when one is due.
func (r *rankRun) iterate(ctx context.Context) (stop bool, err error) {
	a, t := r.a, r.t
	if injectFault != nil {
		if err := injectFault(t.groups.World.Rank(), t.iteration+1); err != nil {
			return false, err
		}
	}
	if err := t.injectedStop(ctx); err != nil {
		return false, err
	}
	// Each iteration's MoE metrics count its own training forwards.
	t.resetMoEStats()
	var s stepResult
	var tl *pp.Timeline
	if a.ProfileSchedule != "" && t.iteration == a.TrainIters-1 {
		s, tl, err = t.profiledStep(ctx)
	} else {
		s, err = t.step(ctx)
	}
	if err != nil {
		return false, err
	}
	if err := r.timeline(tl); err != nil {
		return false, err
	}
	if err := r.report(ctx, s); err != nil {
		return false, err
	}
	last := t.iteration == a.TrainIters
	if a.EvalInterval > 0 && t.iteration%a.EvalInterval == 0 || last {
		if err := r.validate(ctx); err != nil {
			return false, err
		}
	}
	switch np := a.NonPersistentSaveInterval; {
	case a.Save != "" && (a.SaveInterval > 0 && t.iteration%a.SaveInterval == 0 || last):
		// With --async-save the shards are written in the background
		// unless the run ends here.
		if err := t.save(ctx, a.AsyncSave && !last); err != nil {
			return false, err
		}
	case np > 0 && t.iteration%np == 0:
		if err := t.saveNonPersistent(ctx); err != nil {
			return false, err
		}
		if r.log != nil {
			r.log.printf("gotron: saved a non-persistent checkpoint at iteration %d to %s\n", t.iteration, a.NonPersistentDir(a.Save))
		}
	default:
		if err := t.finishSave(ctx, false); err != nil {
			return false, err
		}
	}
	return r.exit(ctx)
}

// timeline writes the profiled iteration's schedule (--profile-schedule)
// and reports its bubble; nil does nothing.
func (r *rankRun) timeline(tl *pp.Timeline) error {
	if tl == nil {
		return nil
	}
	if err := tl.WriteSVG(r.a.ProfileSchedule); err != nil {
		return fmt.Errorf("--profile-schedule: %w", err)
	}
	if r.log != nil {
		b := tl.Bubbles()
		mp := r.a.Model.ModelParallelConfig
		theory, err := pp.EqualTimesBubble(pp.Config{PP: tl.PP, VPP: mp.VirtualPipelineModelParallelSize, Microbatches: tl.Microbatches,
			OverlapP2PComm: mp.OverlapP2PComm, BatchP2PComm: mp.BatchP2PComm, Schedule: r.a.PipelineSchedule})
		if err != nil { // unreachable: the schedule ran
			theory = pp.TheoreticalBubble(tl.PP, tl.VPP, tl.Microbatches)
		}
		r.log.printf("gotron: schedule timeline of iteration %d written to %s: measured bubble %.1f%% (the busiest rank's idle time), %.1f%% in theory (the schedule's at equal forward, backward and weight-gradient times), mean idle time %.1f%%\n",
			r.t.iteration, r.a.ProfileSchedule, 100*pp.Bubble(b), 100*theory, 100*pp.MeanBubble(b))
	}
	return nil
}

// report records the iteration in the result and logs it (with the
// collectives its line needs on every rank: peak memory for --log-json, a
// MoE model's metrics).
func (r *rankRun) report(ctx context.Context, s stepResult) error {
	a, t := r.a, r.t
	if a.LogJSON != "" {
		if err := t.gatherPeaks(ctx, &s); err != nil {
			return err
		}
	}
	// A MoE model's metrics: a collective on every rank, every iteration
	// (the line averages them over the interval).
	moeRec, err := t.moeMetrics(ctx)
	if err != nil {
		return err
	}
	r.res.Losses = append(r.res.Losses, s.loss)
	if a.CheckForSpikyLoss && r.spiky.spike(s.loss) && r.log != nil {
		r.log.printf("gotron: warning: iteration %d: spiky loss: %g is at least %d times the largest of the first %d iterations' losses, %g (--check-for-spiky-loss)\n",
			t.iteration, s.loss, SpikyLossFactor, spikyLossSamples, r.spiky.max)
	}
	if s.mtpLosses != nil {
		r.res.MTPLosses = append(r.res.MTPLosses, s.mtpLosses)
	}
	r.res.GradNorms = append(r.res.GradNorms, s.gradNorm)
	r.res.ParamsNorms, r.res.NumZeros = append(r.res.ParamsNorms, s.paramsNorm), append(r.res.NumZeros, s.numZeros)
	if s.skipped {
		r.res.Skipped++
	}
	timing, err := r.timing(ctx)
	if err != nil {
		return err
	}
	if r.log != nil {
		if err := r.log.iteration(a, t.iteration, s, moeRec, a.LogInterval); err != nil {
			return err
		}
		r.log.printf("%s", timing)
		if t.rerun != nil && t.rerun.note != "" {
			r.log.printf("%s", t.rerun.note)
		}
		if a.RerunMode == RerunReportStats && (t.iteration%a.LogInterval == 0 || t.iteration == a.TrainIters) {
			r.log.printf("%s", t.rerun.statsReport())
		}
	}
	return nil
}

// timing returns, with --timing-log-level, at the iterations that print a
// line, Megatron's report of the timers over the ranks since the last
// (a collective on every rank); "" otherwise.
func (r *rankRun) timing(ctx context.Context) (string, error) {
	a, t := r.a, r.t
	if t.timers == nil {
		return "", nil
	}
	r.timedIters++
	if t.iteration%a.LogInterval != 0 && t.iteration != a.TrainIters {
		return "", nil
	}
	times, err := t.timers.gather(ctx, t.groups.World)
	n := r.timedIters
	r.timedIters = 0
	if err != nil {
		return "", err
	}
	var out string
	if a.TimingLogLevel > 0 {
		out = formatTimers(timersAtLevel(times, a.TimingLogLevel), n, a.TimingLogOption)
	}
	if a.LogStraggler {
		out += formatStragglers(times, n, a.StragglerThreshold, a.StragglerMinmaxCount)
	}
	return out, nil
}

// exit ends the run after this iteration when a signal, --exit-interval
// or --exit-duration-in-mins says so, saving first with --save.
func (r *rankRun) exit(ctx context.Context) (stop bool, err error) {
	t := r.t
	reason, stop, err := t.exitReason(ctx, r.o.Stop, r.started)
	if err != nil || !stop {
		return false, err
	}
	if err := t.finishSave(ctx, true); err != nil {
		return false, err
	}
	if r.a.Save != "" && r.res.Saved != t.iteration {
		if err := t.save(ctx, false); err != nil {
			return false, err
		}
	}
	if r.log != nil {
		r.log.printf("gotron: exiting after iteration %d (%s)\n", t.iteration, reason)
	}
	r.res.Exit = &reason
	return true, nil
}

// finish ends a run that trained to --train-iters (or --skip-train): the
// last save, the evaluation of a loaded model, the sample.
func (r *rankRun) finish(ctx context.Context, rank int) error {
	a, t := r.a, r.t
	if err := t.finishSave(ctx, true); err != nil {
		return err
	}
	if a.SkipTrain {
		// --skip-train: evaluate the loaded model, as the loop's last
		// iteration would.
		if err := r.validate(ctx); err != nil {
			return err
		}
	}
	if a.Sample > 0 && a.DDP.OverlapParamGather {
		// The last step's parameter all-gather was left for the next
		// forward pass: finish it on every rank, or the sample would see
		// the other ranks' shards a step old.
		if err := t.finishParamSync(ctx); err != nil {
			return err
		}
	}
	experts := a.Model.NumMoEExperts > 0 && a.Model.ExpertModelParallelSize*a.Model.EffectiveExpertTensorParallelSize() > 1
	if a.Sample > 0 && (t.dpRank == 0 || experts || a.DDP.ShardsParameters()) {
		// The ranks of the first data-parallel replica generate (the
		// model's forward is a collective over its tensor-parallel group);
		// the other replicas hold the same weights and need not, unless
		// the expert grid spans replicas (the MoE layers' dispatch is a
		// collective over it) or Megatron-FSDP shards the parameters over
		// them (each layer's gather is a collective over the
		// data-parallel group): then every replica generates the same
		// text. Rank 0 reports the text.
		s, err := t.generate(ctx, a.SamplePrompt, a.Sample, a.SampleTemperature)
		if err != nil {
			return err
		}
		if rank == 0 {
			r.res.Sample = s
		}
	}
	return nil
}

// normalise fills defaults that depend on the world: the global batch is
// the step schedule's last, or one micro-batch per data-parallel rank, when unset, and the vocabulary of
// byte-level text is 256 when unset.
func normalise(a Args, world int) Args {
	if s := a.stepSchedule(); s != nil && a.GlobalBatchSize == 0 {
		a.GlobalBatchSize = s.Last()
	}
	if a.GlobalBatchSize == 0 {
		a.GlobalBatchSize = a.MicroBatchSize * max(1, a.DataParallelSize(world))
	}
	if a.TrainSamples > 0 && a.TrainIters == 0 {
		a.TrainIters = a.iterationsFor(int64(a.TrainSamples))
	}
	if a.Model.VocabSize == 0 && !a.MockData {
		a.Model.VocabSize = 256
	}
	if a.Model.MaxPositionEmbeddings == 0 {
		a.Model.MaxPositionEmbeddings = a.Model.SeqLength
	}
	// The pipeline settings Megatron's training layer derives
	// (argument_utils.py): the virtual stages from a layout or from
	// --num-layers-per-virtual-pipeline-stage; pipeline messages in the
	// parameters' dtype; outputs deallocated after their send; overlapped
	// P2P communication (unbatched) with the interleaved schedule unless
	// --no-overlap-p2p-communication, never without it.
	// An explicit --overlap-p2p-communication without the interleaved
	// schedule stays set, so that validation refuses it (the reference's
	// training layer turns it off with a warning).
	a.Model = a.Model.ResolvePipelineLayout()
	a.Model.PipelinePlacement = pp.PlacementOf(a.PipelineSchedule)
	mp := &a.Model.ModelParallelConfig
	a = a.ResolvePrecision()
	if a.OverlapP2PComm != nil {
		mp.OverlapP2PComm = *a.OverlapP2PComm
		mp.BatchP2PComm = !mp.OverlapP2PComm
	}
	if mp.PipelineModelParallelSize > 1 {
		if mp.PipelineDType == config.DTypeNone {
			mp.PipelineDType = mp.ParamsDType
		}
		if a.OverlapP2PComm == nil {
			// (ZB-V's two chunks exchange asynchronously on their own.)
			mp.OverlapP2PComm = mp.VirtualPipelineModelParallelSize > 0 && a.Model.PipelinePlacement == config.PlacementLoop
		}
		mp.BatchP2PComm = !mp.OverlapP2PComm
		mp.DeallocatePipelineOutputs = true
		if pp.ZeroBubble(a.PipelineSchedule) {
			// The zero-bubble schedules issue exchanges asynchronously,
			// which the communicator does unbatched.
			mp.BatchP2PComm = false
		}
	}
	if a.RerunMode == RerunValidateResults {
		// A non-finite loss runs the iteration again instead of ending it,
		// and its gradients are its consequence: the rerun judges both.
		a.DDP.CheckForNaNInGrad = false
	}
	a.DDP.Finalize() // Megatron-FSDP's implied settings
	if a.AlignParamGather != nil {
		a.DDP.AlignParamGather = *a.AlignParamGather
	} else {
		// (Megatron-FSDP gathers layer by layer: nothing to align.)
		// (The V schedules gather each chunk's parameters in its first
		// forward's pre-hook: no param_sync_func to align.)
		a.DDP.AlignParamGather = a.DDP.OverlapParamGather && mp.Interleaved() && !a.DDP.ShardsGradients() &&
			a.Model.PipelinePlacement == config.PlacementLoop
	}
	return a
}

// count is "1 thing" or "n things".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// batchDesc describes the micro-batches per iteration: "4 micro-batches
// of 2 per rank per iteration", or the ramp's range of them.
func batchDesc(a Args, dp int) string {
	rows := a.MicroBatchSize * dp
	if s := a.stepSchedule(); s != nil {
		return stepsDesc(s, a.Model.SeqLength, rows, a.MicroBatchSize)
	}
	if r, ok := a.ramp(); ok {
		// (Megatron-Core core_v0.18.0 on ignores the flag with a warning.)
		return fmt.Sprintf("global batch ramping from %d by %d to %d over %d samples, as --rampup-batch-size did up to Megatron-Core 0.17 (0.18 on ignores it for --step-batch-size-schedule): %d to %d micro-batches of %d per rank per iteration",
			r.Start, r.Increment, a.GlobalBatchSize, r.Samples, r.Start/rows, a.GlobalBatchSize/rows, a.MicroBatchSize)
	}
	return fmt.Sprintf("%s of %d per rank per iteration", count(a.GlobalBatchSize/rows, "micro-batch", "micro-batches"), a.MicroBatchSize)
}

// cpTypes lists the context-parallel attention types the layers use, each
// once, in layer order.
func cpTypes(m config.TransformerConfig) []string {
	var out []string
	for i := range m.NumLayers {
		if t := m.LayerCPCommType(i); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// layoutDesc describes the parallel layout for the start-up line.
func layoutDesc(a Args, dp int) string {
	m := a.Model
	s := fmt.Sprintf("data parallel %d", dp)
	if p := m.PipelineModelParallelSize; p > 1 {
		pipe := fmt.Sprint(p)
		if v := m.VirtualPipelineModelParallelSize; v > 0 {
			pipe = fmt.Sprintf("%d with %d virtual stages", p, v)
		}
		switch sch := a.PipelineSchedule; {
		case pp.PlacementOf(sch) == config.PlacementV:
			pipe += " in a V (" + sch + ": rank r holds stages r and 2P−1−r)"
		case pp.ZeroBubble(sch):
			pipe += ", " + sch
		}
		s = fmt.Sprintf("pipeline parallel %s, %s", pipe, s)
	}
	if n := m.ContextParallelSize; n > 1 {
		s = fmt.Sprintf("context parallel %d (%s), %s", n, strings.Join(cpTypes(m), ", "), s)
	}
	if tp := m.TensorModelParallelSize; tp > 1 {
		s = fmt.Sprintf("tensor parallel %d, %s", tp, s)
		if m.SequenceParallel {
			s = "sequence and " + s
		}
	}
	if d := a.DDP; d.MegatronFSDP() {
		s += fmt.Sprintf(", Megatron-FSDP %s", fsdpNames[d.DataParallelShardingStrategy])
	}
	if g := m.RecomputeGranularity; g != "" {
		s += ", " + g + " recompute"
	}
	if m.PaddedVocabSize() != m.VocabSize {
		s += fmt.Sprintf(", vocabulary %d padded to %d", m.VocabSize, m.PaddedVocabSize())
	}
	return s
}

// fsdpNames names Megatron-FSDP's strategies for the start-up line.
var fsdpNames = map[string]string{
	config.NoShard:               "no_shard (DDP)",
	config.ShardOptim:            "optim (ZeRO-1: optimizer state sharded)",
	config.ShardOptimGrads:       "optim_grads (ZeRO-2: optimizer state and gradients sharded)",
	config.ShardOptimGradsParams: "optim_grads_params (ZeRO-3: optimizer state, gradients and decoder layers' parameters sharded)",
}

func timeout(a Args) time.Duration {
	return time.Duration(a.DistributedTimeoutMinutes * float64(time.Minute))
}
