package train

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/moe"
	"github.com/schollz/progressbar/v3"
)

// logger writes rank 0's iteration lines, the JSON log and the progress bar.
type logger struct {
	out   io.Writer
	json  *os.File
	enc   *json.Encoder
	tb    *tbLog // --tensorboard-dir; nil without
	bar   *progressbar.ProgressBar
	start time.Time
	first int // the run's first iteration
	world int

	// Accumulated since the last printed line.
	sumLoss float64
	sumTime time.Duration
	// sumTokens are the interval's tokens (global batches ramp).
	sumTokens float64
	count     int
	skipped   int
	// sumMoE are the interval's sums of a MoE model's losses (each the
	// mean over the MoE layers), in moe.Metrics.Means' order.
	sumMoE []moe.Mean
	// sumMTP are the interval's sums of the MTP depths' losses.
	sumMTP []float64
}

// Record is one line of --log-json.
type Record struct {
	Iteration int     `json:"iteration"`
	Loss      float64 `json:"loss"`
	LR        float64 `json:"lr"`
	// GradNorm is the gradient norm; nil when the step was skipped.
	GradNorm *float64 `json:"grad_norm"`
	// ParamsNorm and NumZeros are --log-params-norm's and
	// --log-num-zeros-in-grad's figures, when asked for (NumZeros absent
	// for a skipped step).
	ParamsNorm *float64 `json:"params_norm,omitempty"`
	NumZeros   *float64 `json:"num_zeros,omitempty"`
	TokensPerS float64  `json:"tokens_per_s"`
	StepMS     float64  `json:"step_ms"`
	// PeakActivationBytes is, per global rank, the peak of the activation
	// memory the rank held for backward during the iteration (bytes
	// saved by the forward pass; see docs/MEMORY.md).
	PeakActivationBytes []int64 `json:"peak_activation_bytes"`
	// LossScale is the loss scale the iteration ran with (with --fp16, or
	// --loss-scale); Skipped says a non-finite gradient skipped its
	// optimizer step.
	LossScale *float64 `json:"loss_scale,omitempty"`
	Skipped   bool     `json:"skipped,omitempty"`
	// GlobalBatchSize is the iteration's global batch (it ramps with
	// --rampup-batch-size); ConsumedSamples the samples consumed once it
	// ran.
	GlobalBatchSize int   `json:"global_batch_size"`
	ConsumedSamples int64 `json:"consumed_samples"`
	// MoE holds a MoE model's metrics of the iteration (absent for a
	// dense model).
	MoE *moe.Metrics `json:"moe,omitempty"`
	// MTPLosses are the multi-token-prediction depths' losses, depth 1
	// first (Megatron's "mtp_1 loss", ...; absent without MTP).
	MTPLosses []float64 `json:"mtp_losses,omitempty"`
}

func newLogger(out io.Writer, progress io.Writer, a Args, world int) (*logger, error) {
	l := &logger{out: out, start: time.Now(), first: -1, world: world}
	if a.LogJSON != "" {
		if err := os.MkdirAll(filepath.Dir(a.LogJSON), 0o755); err != nil {
			return nil, fmt.Errorf("--log-json: %w", err)
		}
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if a.restarted {
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND // an in-process restart's
		}
		f, err := os.OpenFile(a.LogJSON, flags, 0o644)
		if err != nil {
			return nil, fmt.Errorf("--log-json: %w", err)
		}
		l.json, l.enc = f, json.NewEncoder(f)
	}
	if a.TensorBoard.Dir != "" {
		tb, err := newTBLog(a.TensorBoard, world)
		if err != nil {
			l.close()
			return nil, err
		}
		l.tb = tb
	}
	total := a.TrainIters
	if progress != nil {
		l.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(progress),
			progressbar.OptionSetDescription("training"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond))
	}
	return l, nil
}

// printf writes a line, keeping the progress bar below it.
func (l *logger) printf(format string, args ...any) {
	if l.bar != nil {
		l.bar.Clear()
	}
	fmt.Fprintf(l.out, format, args...)
}

// iteration records one iteration and prints a Megatron-style line every
// interval iterations. metrics is a MoE model's metrics of the iteration (nil
// for a dense model).
func (l *logger) iteration(a Args, it int, r stepResult, metrics *moe.Metrics, interval int) error {
	rec := iterationRecord(a, it, r, metrics)
	if l.enc != nil {
		if err := l.enc.Encode(rec); err != nil {
			return fmt.Errorf("--log-json: %w", err)
		}
	}
	if l.first < 0 {
		l.first = it
	}
	if l.tb != nil {
		tflops := math.NaN()
		if a.LogThroughput {
			tflops = l.tflopsPerRank(a, float64(r.globalBatch*a.Model.SeqLength), r.elapsed)
		}
		if err := l.tb.iteration(it, r, metrics, it == l.first, tflops); err != nil {
			return fmt.Errorf("--tensorboard-dir: %w", err)
		}
	}
	l.accumulate(a, r, metrics)
	if it%interval == 0 || it == a.TrainIters {
		l.printInterval(a, it, r)
	}
	if l.bar != nil {
		l.bar.Describe(fmt.Sprintf("loss %.3f", r.loss))
		l.bar.Set(it)
	}
	return nil
}

// iterationRecord is --log-json's record of iteration it.
func iterationRecord(a Args, it int, r stepResult, metrics *moe.Metrics) Record {
	tokens := float64(r.globalBatch) * float64(a.Model.SeqLength)
	rec := Record{Iteration: it, Loss: r.loss, LR: r.lr,
		TokensPerS: tokens / r.elapsed.Seconds(), StepMS: float64(r.elapsed.Microseconds()) / 1000,
		PeakActivationBytes: r.peakActivations, Skipped: r.skipped,
		GlobalBatchSize: r.globalBatch, ConsumedSamples: r.consumed, MoE: metrics, MTPLosses: r.mtpLosses}
	if !r.skipped {
		rec.GradNorm = &r.gradNorm
	}
	rec.ParamsNorm, rec.NumZeros = finite(r.paramsNorm), finite(r.numZeros)
	if !math.IsNaN(r.lossScale) {
		rec.LossScale = &r.lossScale
	}
	return rec
}

// finite points at v, or is nil for NaN (a figure not computed).
func finite(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// accumulate adds an iteration to the interval's sums.
func (l *logger) accumulate(a Args, r stepResult, metrics *moe.Metrics) {
	l.sumLoss += r.loss
	if l.sumMTP == nil && r.mtpLosses != nil {
		l.sumMTP = make([]float64, len(r.mtpLosses))
	}
	for k, v := range r.mtpLosses {
		l.sumMTP[k] += v
	}
	l.sumTime += r.elapsed
	l.sumTokens += float64(r.globalBatch) * float64(a.Model.SeqLength)
	if metrics != nil {
		for i, m := range metrics.Means() {
			if i == len(l.sumMoE) {
				l.sumMoE = append(l.sumMoE, moe.Mean{Name: m.Name})
			}
			l.sumMoE[i].Value += m.Value
		}
	}
	l.count++
	if r.skipped {
		l.skipped++
	}
}

// printInterval prints Megatron's iteration line for the interval ending
// at iteration it (r), and starts the next interval.
func (l *logger) printInterval(a Args, it int, r stepResult) {
	avg := l.sumTime / time.Duration(l.count)
	// With a loss scaler, Megatron's loss scale and the interval's
	// number of skipped iterations join the line.
	var scale, skipped string
	if !math.IsNaN(r.lossScale) {
		scale = fmt.Sprintf("loss scale: %.1f | ", r.lossScale)
		skipped = fmt.Sprintf("number of skipped iterations: %3d | ", l.skipped)
	}
	norm := fmt.Sprintf("grad norm: %.3f | ", r.gradNorm)
	if r.skipped {
		norm = ""
	}
	// --log-num-zeros-in-grad and --log-params-norm follow it, as in
	// Megatron's line.
	if !math.IsNaN(r.numZeros) {
		norm += fmt.Sprintf("num zeros: %.1f | ", r.numZeros)
	}
	if !math.IsNaN(r.paramsNorm) {
		norm += fmt.Sprintf("params norm: %.3f | ", r.paramsNorm)
	}
	// A MoE model's auxiliary losses follow the lm loss, as in
	// Megatron's line: each the mean over the MoE layers, averaged
	// over the interval like the loss.
	var moeLosses string
	for _, m := range l.sumMoE {
		moeLosses += fmt.Sprintf("%s: %.6E | ", m.Name, m.Value/float64(l.count))
	}
	// The MTP depths' losses follow, as Megatron's "mtp_k loss".
	for k, v := range l.sumMTP {
		moeLosses += fmt.Sprintf("%s: %.6E | ", mtpLossName(k), v/float64(l.count))
	}
	// --log-throughput: Megatron's model TFLOP/s per device, here per rank.
	var tflops string
	if a.LogThroughput {
		tflops = fmt.Sprintf("throughput per rank (TFLOP/s/rank): %.3f | ", l.tflopsPerRank(a, l.sumTokens, l.sumTime))
	}
	l.printf(" [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | %sthroughput (tokens/s): %.0f | learning rate: %.6E | global batch size: %5d | lm loss: %.6E | %s%s%s%selapsed: %s |\n",
		time.Now().Format("2006-01-02 15:04:05"), it, a.TrainIters, r.consumed,
		float64(avg.Microseconds())/1000, tflops, l.sumTokens/l.sumTime.Seconds(), r.lr, r.globalBatch,
		l.sumLoss/float64(l.count), moeLosses, scale, norm, skipped, time.Since(l.start).Round(time.Second))
	l.sumLoss, l.sumTime, l.sumTokens, l.count, l.skipped, l.sumMoE, l.sumMTP = 0, 0, 0, 0, 0, nil, nil
}

// tflopsPerRank is the model FLOPs (gpt.TrainingFLOPs) of tokens trained
// in elapsed, per second per rank, in TFLOP/s: Megatron's "throughput per
// GPU" (0 for no time).
func (l *logger) tflopsPerRank(a Args, tokens float64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return gpt.TrainingFLOPs(a.Model, int(tokens)) / elapsed.Seconds() / float64(max(l.world, 1)) / 1e12
}

// validation prints Megatron's validation line (consumed: the samples
// trained on so far).
func (l *logger) validation(it int, loss float64, consumed int64) error {
	l.printf("-----------------------------------------------------------------------------------------\n")
	l.printf(" validation loss at iteration %d | lm loss value: %.6E | lm loss PPL: %.6E |\n", it, loss, math.Exp(loss))
	l.printf("-----------------------------------------------------------------------------------------\n")
	if l.enc != nil {
		v := loss
		if err := l.enc.Encode(struct {
			Iteration int      `json:"iteration"`
			ValidLoss *float64 `json:"valid_loss"`
		}{it, &v}); err != nil {
			return fmt.Errorf("--log-json: %w", err)
		}
	}
	if l.tb != nil {
		return l.tb.validation(it, loss, consumed)
	}
	return nil
}

func (l *logger) close() error {
	if l.bar != nil {
		l.bar.Finish()
	}
	var err error
	if l.tb != nil {
		err = l.tb.close()
	}
	if l.json != nil {
		if jerr := l.json.Close(); err == nil {
			err = jerr
		}
	}
	return err
}

// mtpLossName is Megatron's name of MTP depth k's (from 0) logged loss.
func mtpLossName(k int) string { return fmt.Sprintf("mtp_%d loss", k+1) }
