package train

import (
	"errors"
	"fmt"
	"math"
	"runtime/metrics"
	"syscall"

	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/tensorboard"
)

// TensorBoard is --tensorboard-dir and its family (Megatron's
// LoggerConfig): the scalars of the run written as TensorBoard event
// files, with Megatron's tags.
type TensorBoard struct {
	// Dir receives the event file (--tensorboard-dir; "" writes none).
	Dir string
	// LogInterval writes the iteration scalars every this many
	// iterations (--tensorboard-log-interval, 1).
	LogInterval int
	// QueueSize is how many events wait before the file is flushed
	// (--tensorboard-queue-size, 1000).
	QueueSize int
	// LogLossScale writes loss-scale (on by default;
	// --no-log-loss-scale-to-tensorboard), LogWorldSize world-size,
	// LogTimers iteration-time, LogValidationPPL the validation
	// perplexity, LogMemory the process's memory (--log-*-to-tensorboard).
	LogLossScale, LogWorldSize, LogTimers, LogValidationPPL, LogMemory bool
}

// defaultTensorBoard is Megatron's defaults.
func defaultTensorBoard() TensorBoard {
	return TensorBoard{LogInterval: 1, QueueSize: 1000, LogLossScale: true}
}

// check refuses a TensorBoard setting that cannot be carried out.
func (tb TensorBoard) check(v *violations) {
	if tb.LogInterval < 1 || tb.QueueSize < 1 {
		v.add("--tensorboard-log-interval %d, --tensorboard-queue-size %d: each must be at least 1", tb.LogInterval, tb.QueueSize)
	}
	if tb.Dir != "" {
		return
	}
	for _, f := range []struct {
		set  bool
		flag string
	}{
		{tb.LogTimers, "--log-timers-to-tensorboard"}, {tb.LogValidationPPL, "--log-validation-ppl-to-tensorboard"},
		{tb.LogMemory, "--log-memory-to-tensorboard"}, {tb.LogWorldSize, "--log-world-size-to-tensorboard"},
	} {
		if f.set {
			v.add("%s writes to TensorBoard, and --tensorboard-dir is not given: set --tensorboard-dir DIR, or drop %s", f.flag, f.flag)
		}
	}
}

// tbLog writes the run's scalars, as Megatron's training_log and
// evaluate_and_print_results do: each value against the iteration, most
// also "… vs samples" against the consumed samples.
type tbLog struct {
	w     *tensorboard.Writer
	cfg   TensorBoard
	world int
	err   error // the first write error, reported once at close
}

func newTBLog(cfg TensorBoard, world int) (*tbLog, error) {
	w, err := tensorboard.Create(cfg.Dir, tensorboard.Options{QueueSize: cfg.QueueSize})
	if err != nil {
		if u := errors.Unwrap(err); u != nil {
			err = u
		}
		return nil, fmt.Errorf("--tensorboard-dir %s: cannot write the event file there (%v): give a directory gotron can create and write", cfg.Dir, err)
	}
	return &tbLog{w: w, cfg: cfg, world: world}, nil
}

// scalar writes tag at step and, with samples ≥ 0, "tag vs samples".
func (l *tbLog) scalar(tag string, v float64, step int, samples int64) {
	if l.err == nil {
		l.err = l.w.Scalar(tag, v, int64(step))
	}
	if l.err == nil && samples >= 0 {
		l.err = l.w.Scalar(tag+" vs samples", v, samples)
	}
}

// iteration writes iteration it's scalars, every LogInterval iterations;
// first says it is the run's first (its time holds the start-up, which
// Megatron keeps out of iteration-time); tflops is the iteration's model
// TFLOP/s per rank with --log-throughput (NaN without), written as
// throughput with LogTimers, as Megatron writes it.
func (l *tbLog) iteration(it int, r stepResult, metrics *moe.Metrics, first bool, tflops float64) error {
	if it%l.cfg.LogInterval != 0 {
		return nil
	}
	n := r.consumed
	l.scalar("learning-rate", r.lr, it, n)
	l.scalar("batch-size", float64(r.globalBatch), it, n)
	l.scalar("lm loss", r.loss, it, n)
	for k, v := range r.mtpLosses {
		l.scalar(mtpLossName(k), v, it, n)
	}
	if metrics != nil {
		for _, m := range metrics.Means() {
			l.scalar(m.Name, m.Value, it, n)
		}
	}
	if l.cfg.LogLossScale {
		scale := r.lossScale
		if math.IsNaN(scale) {
			scale = 1 // no scaler: Megatron's optimizers report 1
		}
		l.scalar("loss-scale", scale, it, n)
	}
	if l.cfg.LogWorldSize {
		l.scalar("world-size", float64(l.world), it, n)
	}
	if !r.skipped {
		l.scalar("grad-norm", r.gradNorm, it, n)
	}
	if !math.IsNaN(r.numZeros) {
		l.scalar("num-zeros", r.numZeros, it, n)
	}
	if !math.IsNaN(r.paramsNorm) {
		l.scalar("params-norm", r.paramsNorm, it, n)
	}
	if l.cfg.LogMemory {
		l.memory(it)
	}
	if l.cfg.LogTimers && !first {
		l.scalar("iteration-time", r.elapsed.Seconds(), it, -1)
		if !math.IsNaN(tflops) {
			l.scalar("throughput", tflops, it, -1)
		}
	}
	return l.err
}

// memory writes the process's memory under Megatron's tags, their CPU
// meaning: mem-allocated-bytes the live heap, mem-reserved-bytes all the
// memory Go's runtime holds, mem-max-allocated-bytes the peak resident
// set, mem-allocated-count the live heap objects.
func (l *tbLog) memory(it int) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/gc/heap/objects:objects"}}
	metrics.Read(s)
	var ru syscall.Rusage
	peak := 0.0
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		peak = float64(ru.Maxrss) * 1024 // kilobytes on Linux
	}
	l.scalar("mem-reserved-bytes", float64(s[1].Value.Uint64()), it, -1)
	l.scalar("mem-allocated-bytes", float64(s[0].Value.Uint64()), it, -1)
	l.scalar("mem-max-allocated-bytes", peak, it, -1)
	l.scalar("mem-allocated-count", float64(s[2].Value.Uint64()), it, -1)
}

// validation writes the validation loss (and perplexity, with
// LogValidationPPL) after iteration it.
func (l *tbLog) validation(it int, loss float64, consumed int64) error {
	l.scalar("lm loss validation", loss, it, consumed)
	if l.cfg.LogValidationPPL {
		l.scalar("lm loss validation ppl", math.Exp(min(20, loss)), it, consumed)
	}
	return l.err
}

func (l *tbLog) close() error {
	err := l.w.Close()
	if l.err != nil {
		return fmt.Errorf("--tensorboard-dir: %w", l.err)
	}
	if err != nil {
		return fmt.Errorf("--tensorboard-dir: %w", err)
	}
	return nil
}
