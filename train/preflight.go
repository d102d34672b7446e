package train

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime/debug"
	"strings"

	"github.com/gotron/gotron/internal/sysmem"
	"github.com/gotron/gotron/plan"
)

// memoryRun is what the memory model (package plan) reads of the run.
func (a Args) memoryRun() plan.Run {
	return plan.Run{Model: a.Model, DDP: a.DDP, GradReduceInBF16: a.GradReduceInBF16,
		MicroBatchSize: a.MicroBatchSize, GlobalBatchSize: a.largestBatch(), Threads: a.Threads,
		Save: a.Save != "", AsyncSave: a.AsyncSave, SaveOptim: !a.NoSaveOptim,
		SGD: a.Optimizer == "sgd", SGDMomentum: a.SGDMomentum, PipelineSchedule: a.PipelineSchedule}
}

// estimateMemory is the memory localRanks of the world's ranks need
// together (plan.Memory), for arguments normalised for world ranks.
func estimateMemory(a Args, world, localRanks int) plan.Need {
	return plan.Memory(a.memoryRun(), world, localRanks)
}

// MeasureActivations is plan.MeasureActivations of a's model, completed
// as a run on its tensor-parallel ranks completes it.
func MeasureActivations(ctx context.Context, a Args) ([]plan.Row, error) {
	a = normalise(a, max(a.Model.TensorModelParallelSize, 1))
	return plan.MeasureActivations(ctx, a.Model, a.MicroBatchSize, a.Seed)
}

// headroom is the fraction of the available memory a run's estimate may
// take: the rest is for what the estimate leaves out (the Go runtime, the
// autograd tape's records, the data, buffers of the collectives).
const headroom = 0.9

// availableMemory is sysmem.Available; tests replace it.
var availableMemory = sysmem.Available

// checkMemory refuses a run whose estimated memory exceeds what the
// machine has available, before anything is allocated, with the numbers,
// the limit that applied (sysmem.Limit.Source) and the flags that change
// them. A machine whose available memory cannot be read is not checked.
//
// A run that fits gets a soft heap limit (runtime/debug.SetMemoryLimit) of
// this process's share of the available memory, ranksHere of the
// machine's localRanks, unless GOMEMLIMIT is set: Go's collector
// otherwise lets the heap grow to twice the live data between cycles, and
// a model that fits would be killed by the kernel for its garbage.
func checkMemory(a Args, world, localRanks, ranksHere int) error {
	limit, ok := availableMemory()
	if !ok {
		return nil
	}
	avail := limit.Bytes
	need := estimateMemory(a, world, localRanks)
	if need.Total() <= headroom*float64(avail) {
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(avail / int64(max(localRanks, 1)) * int64(max(ranksHere, 1)))
		}
		return nil
	}
	parts := []string{
		"weights " + bytesOf(need.Weights), "gradients " + bytesOf(need.Gradients),
		"optimizer state " + bytesOf(need.Optimizer), "activations " + bytesOf(need.Activations),
		"attention scratch " + bytesOf(need.Attention),
	}
	if need.Checkpoint > 0 {
		parts = append(parts, "checkpoint copy "+bytesOf(need.Checkpoint))
	}
	var fix []string
	model := need.Weights + need.Gradients + need.Optimizer
	if model > need.Total()/4 {
		fix = append(fix, "a smaller model (--num-layers, --hidden-size, --ffn-hidden-size, --vocab-size)")
		if !a.Model.BF16 && !a.Model.FP16 {
			fix = append(fix, "--bf16")
		}
		if !a.DDP.UseDistributedOptimizer && a.DataParallelSize(world) > 1 {
			fix = append(fix, "--use-distributed-optimizer")
		}
	}
	if need.Activations > need.Total()/4 {
		fix = append(fix, "a shorter --seq-length or --micro-batch-size")
		if a.Model.RecomputeGranularity == "" {
			fix = append(fix, "--recompute-granularity selective or full")
		}
	}
	if need.Attention > need.Total()/4 {
		fix = append(fix, "a shorter --seq-length (attention keeps s² scores per worker)", "fewer --threads")
	}
	if need.AsyncSave && need.Checkpoint > need.Total()/4 {
		fix = append(fix, "no --async-save (its copy of the state lives while training goes on)")
	}
	fix = append(fix, "more machines under mpirun (--tensor-model-parallel-size, --pipeline-model-parallel-size)")
	if n := len(fix); n > 1 {
		fix[n-1] = "or " + fix[n-1]
	}
	where := "one rank"
	if localRanks > 1 {
		where = fmt.Sprintf("the %d ranks on this machine", localRanks)
	}
	return fmt.Errorf("invalid arguments: the run needs %s of memory for %s (%s), more than %.0f%% of the %s this machine has available (%s): use %s",
		bytesOf(need.Total()), where, strings.Join(parts, ", "), 100*headroom, sysmem.Format(avail), limit.Source, strings.Join(fix, ", "))
}

// bytesOf formats an estimate that may be +Inf or beyond int64:
// "about 53.6 GiB", "more than 4 EiB".
func bytesOf(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) || x >= 1<<62 {
		return "more than 4 EiB"
	}
	return "about " + sysmem.Format(int64(x))
}

// checkSaveDir creates a directory the run saves into (flag names it) if needed and writes and
// removes a file in it, so that a directory that cannot hold checkpoints
// is refused before training, not at the first save after the work it
// would lose.
func checkSaveDir(flag, dir string) error {
	if dir == "" {
		return nil
	}
	fail := func(what string, err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("invalid arguments: %s %s: %s (%v): choose a directory this user can write", flag, dir, what, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("cannot create the checkpoint directory", err)
	}
	f, err := os.CreateTemp(dir, ".gotron-write-test-")
	if err != nil {
		return fail("cannot write into the checkpoint directory", err)
	}
	name := f.Name()
	_, werr := f.Write([]byte("gotron\n"))
	err = errors.Join(werr, f.Close())
	os.Remove(name)
	if err != nil {
		return fail("cannot write into the checkpoint directory", err)
	}
	return nil
}
