package train

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/data/source"
	"github.com/gotron/gotron/optim"
	"github.com/gotron/gotron/pp"
)

// Placement says where a process's ranks are: the world's size, how many
// ranks share this machine (they divide its cores and memory), how many
// run in this process, and whether this process takes the lock of --save
// (one process per job does).
type Placement struct {
	World, Machine, Process int
	Lock                    bool
}

// check refuses a placement whose counts cannot be: every count at least
// 1, the process's ranks on this machine, the machine's in the world.
func (pl Placement) check() error {
	if pl.Process < 1 || pl.Process > pl.Machine || pl.Machine > pl.World {
		return fmt.Errorf("train: placement of %d ranks in this process, %d on this machine, %d in the world: want 1 ≤ process ≤ machine ≤ world", pl.Process, pl.Machine, pl.World)
	}
	return nil
}

// Prepared is a run's settings after Prepare: the arguments completed and
// validated, the data opened (once per process: its ranks share it), and
// the lock of --save if this process took it. Close releases the lock.
type Prepared struct {
	a     Args
	place Placement
	data  *source.Sets
	lock  *ckpt.Lock
	// npLock is the lock of a non-persistent directory outside --save.
	npLock *ckpt.Lock
	// gc collects once an iteration for the run's ranks in this process.
	gc *collector
}

// Prepare does what a run does before its ranks start, in Run, RunRank
// and any program driving ranks itself (gotron bench) alike: the
// arguments a checkpoint or the data complete, every check that can
// refuse a run up front (the settings, the memory of the placement's
// ranks, the --save directory and, with pl.Lock, its lock), the GEMM
// kernels, and the data.
func Prepare(a Args, o Options, pl Placement) (p *Prepared, err error) {
	if err := pl.check(); err != nil {
		return nil, err
	}
	if a, err = checkLoad(a); err != nil {
		return nil, err
	}
	if a, err = withTokenizer(a); err != nil {
		return nil, err
	}
	if err := checkDataVocab(a); err != nil {
		return nil, err
	}
	a = normalise(a, pl.World)
	if err := a.Validate(pl.World); err != nil {
		return nil, err
	}
	if err := checkMemory(a, pl.World, pl.Machine, pl.Process); err != nil {
		return nil, err
	}
	npDir := "" // a non-persistent directory outside --save
	if a.NonPersistentSaveInterval > 0 && a.NonPersistentGlobalCkptDir != "" {
		npDir = a.NonPersistentGlobalCkptDir
	}
	for _, d := range []struct{ flag, dir string }{{"--save", a.Save}, {"--non-persistent-global-ckpt-dir", npDir}} {
		if err := checkSaveDir(d.flag, d.dir); err != nil {
			return nil, err
		}
	}
	p = &Prepared{a: a, place: pl, gc: newCollector(runtime.GC)}
	if pl.Lock {
		if p.lock, err = lockSave("--save", a.Save, o); err != nil {
			return nil, err
		}
		if p.npLock, err = lockSave("--non-persistent-global-ckpt-dir", npDir, o); err != nil {
			p.Close()
			return nil, err
		}
	}
	if err := DecideKernels(a.Model.BF16); err != nil {
		p.Close()
		return nil, err
	}
	if p.data, err = openData(a); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Args returns the completed arguments.
func (p *Prepared) Args() Args { return p.a }

// Close releases the locks of --save and of a non-persistent directory
// outside it, if this process took them.
func (p *Prepared) Close() {
	p.lock.Unlock()
	p.npLock.Unlock()
}

// Rank is one rank's training for a program that drives the iterations
// itself: its model chunks, optimizer, data and schedule built (a
// checkpoint loaded with --load), each Step one iteration. Step is the
// iteration alone: what Run does around it (evaluation, saves, the
// iteration log, --profile-schedule's picture, the exit conditions) is
// the caller's.
type Rank struct{ t *trainer }

// NewRank builds the rank of world the caller is, as a prepared run's
// ranks are built.
func (p *Prepared) NewRank(ctx context.Context, world comm.Group) (*Rank, error) {
	t, err := newTrainer(ctx, world, p.a, p.data, p.place.Machine, p.gc)
	if err != nil {
		return nil, err
	}
	return &Rank{t: t}, nil
}

// StepOptions are one iteration's requests.
type StepOptions struct {
	// Timeline records every rank's schedule (after a barrier that starts
	// the ranks' clocks together) and returns it on world rank 0.
	Timeline bool
}

// StepReport is what one iteration reports.
type StepReport struct {
	Iteration int // the iterations done, this one included
	Loss      float64
	GradNorm  float64 // NaN when the step was skipped
	Elapsed   time.Duration
	Timeline  *pp.Timeline // with StepOptions.Timeline, on world rank 0
}

// Step runs one iteration: forward and backward over the global batch,
// the gradients' reduction and the optimizer step. Once ctx is done it
// returns ctx's error without starting one (gotron bench's Ctrl-C).
func (r *Rank) Step(ctx context.Context, o StepOptions) (StepReport, error) {
	if err := ctx.Err(); err != nil {
		return StepReport{}, err
	}
	var s stepResult
	var tl *pp.Timeline
	var err error
	if o.Timeline {
		s, tl, err = r.t.profiledStep(ctx)
	} else {
		s, err = r.t.step(ctx)
	}
	if err != nil {
		return StepReport{}, err
	}
	return StepReport{Iteration: r.t.iteration, Loss: s.loss, GradNorm: s.gradNorm, Elapsed: s.elapsed, Timeline: tl}, nil
}

// StateBytes returns the bytes of the rank's model state, measured: the
// parameters and gradients its data-parallel wrappers hold at most
// (dp.Wrapper.StateBytes) and the optimizer's moments and float32 main
// parameters; the memory model's Weights, Gradients and Optimizer
// (plan.Need) estimate them.
func (r *Rank) StateBytes() (weights, grads, optimizer int64) {
	for _, d := range r.t.allDDPs() {
		p, g := d.StateBytes()
		weights, grads = weights+p, grads+g
	}
	return weights, grads, 4 * int64(r.t.opt.Adam().StateElements())
}

// Iteration returns the iterations done (those of a loaded checkpoint
// included).
func (r *Rank) Iteration() int { return r.t.iteration }

// CPWait returns the time ring attention has spent blocked on receives
// (context parallelism) over the rank's iterations: the transfers its
// block computation did not hide.
func (r *Rank) CPWait() time.Duration { return time.Duration(r.t.cpWait.Load()) }

// Buckets returns the rank's gradient buckets over all its model chunks.
func (r *Rank) Buckets() int {
	n := 0
	for _, d := range r.t.allDDPs() {
		n += d.NumBuckets()
	}
	return n
}

// TimeOptimizerStep times one optimizer step as Step takes it, on the
// gradients of the last iteration: the Adam update of the rank's
// parameters (of its shards under the distributed optimizer), then, for
// the distributed optimizer, the all-gather of the updated parameters.
// The learning rate is 0, so the weights keep their values while every
// element is still read and written. A parameter all-gather that
// overlap_param_gather left for the next forward pass is finished first,
// and a barrier lines the ranks up before the clock starts.
//
// It is for after the last Step: the update still counts as a step and
// moves Adam's moments, so a Step after it would train on from another
// optimizer state (and learning rate) than an unmeasured run's.
func (r *Rank) TimeOptimizerStep(ctx context.Context) (adam, gather time.Duration, err error) {
	t := r.t
	if t.a.DDP.OverlapParamGather {
		if err := t.finishParamSync(ctx); err != nil {
			return 0, 0, err
		}
	}
	if err := t.groups.World.Barrier(ctx); err != nil {
		return 0, 0, fmt.Errorf("timing the optimizer step: %w", err)
	}
	start := time.Now()
	if err := t.opt.Adam().Step(optim.Hyper{WeightDecay: float32(t.sched.WD(t.opt.Adam().Steps))}); err != nil {
		return 0, 0, err
	}
	adam = time.Since(start)
	if !t.a.DDP.UseDistributedOptimizer {
		return adam, 0, nil
	}
	start = time.Now()
	for _, d := range t.allDDPs() {
		if err := d.StartParamSync(ctx, true); err != nil {
			return 0, 0, err
		}
	}
	return adam, time.Since(start), nil
}
