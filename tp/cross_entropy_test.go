package tp

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// Tolerances of the vocabulary-parallel path against float64 (and against
// nn.CrossEntropy): the all-reduced sums travel as float32 and each
// probability carries the float32 rounding of x − lse, so differences are
// a few float32 ulps of the values compared (observed, and logged: at most
// 1.2e-7 on the loss and 8e-8 on the gradient). The gradient tolerance is
// tight enough to catch probabilities that keep lse's float32 rounding
// (6e-7 on the fixture's row with logits near 40).
const (
	ceLossTol = 4e-7 // max |Δloss| / max(|loss|, 1), per token
	ceGradTol = 3e-7 // max |Δdlogits| / max |dlogits|, per tensor
)

// ceResult is the loss [N] and the gathered gradient [N, tp·P] of a run.
type ceResult struct {
	loss, dlogits []float32
}

// runVocabCE runs VocabParallelCrossEntropy on ws in-process ranks: rank r
// gets columns [r·P, r·P+P) of full [..., tp·P], the per-token loss is
// back-propagated with dy, and the loss and the gathered logit gradient
// are returned. It fails unless every rank computed bitwise the same loss.
// ops, when non-nil, receives rank 0's all-reduce operations in order.
func runVocabCE(t *testing.T, ws int, full *tensor.Tensor, target []int32, dy []float32, alpha float32, vocab, workers int, ops *[]comm.ReduceOp) ceResult {
	t.Helper()
	var (
		out ceResult
		mu  sync.Mutex
	)
	runRanks(t, ws, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		tape.SetWorkers(workers)
		cg := &ceCountingGroup{Group: g}
		local, err := splitLast(g, full.Clone(), "test")
		if err != nil {
			return err
		}
		x := autograd.NewLeaf(local.Clone(), "logits", true)
		loss := VocabParallelCrossEntropy(tape, x, target, CrossEntropyOptions{LabelSmoothing: alpha, Group: cg, VocabSize: vocab})
		if err := tape.Err(); err != nil {
			return err
		}
		lossCopy := loss.Value.Clone()
		forwardOps := len(cg.ops)
		if err := autograd.Backward(tape, loss, tensor.FromSlice(append([]float32(nil), dy...), len(dy))); err != nil {
			return err
		}
		if len(cg.ops) != forwardOps {
			return fmt.Errorf("backward issued %d all-reduces, want none", len(cg.ops)-forwardOps)
		}
		all, err := gatherFirst(ctx, g, lossCopy.View(1, lossCopy.Len()), "test loss")
		if err != nil {
			return err
		}
		for r := 1; r < ws; r++ {
			if !sameFloat32Bits(all.Data()[r*len(dy):(r+1)*len(dy)], lossCopy.Data()) {
				return fmt.Errorf("rank %d's loss differs from rank 0's", r)
			}
		}
		dl, err := gatherLast(ctx, g, x.Grad, "test dlogits")
		if err != nil {
			return err
		}
		if g.Rank() == 0 {
			mu.Lock()
			out = ceResult{loss: lossCopy.Data(), dlogits: dl.Data()}
			if ops != nil {
				*ops = cg.ops
			}
			mu.Unlock()
		}
		return nil
	})
	return out
}

// ceCountingGroup records the all-reduces issued through it.
type ceCountingGroup struct {
	comm.Group
	ops []comm.ReduceOp
}

func (g *ceCountingGroup) AllReduce(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) error {
	g.ops = append(g.ops, op)
	return g.Group.AllReduce(ctx, buf, op)
}

func (g *ceCountingGroup) AllReduceAsync(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	g.ops = append(g.ops, op)
	return g.Group.AllReduceAsync(ctx, buf, op)
}

func sameFloat32Bits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// refVocabCE is the float64 reference: logits [rows, cols] of which the
// first vocab columns are real, per-token loss and d(Σ loss·dy)/dlogits
// (zero on the padding columns), by the formulas of
// VocabParallelCrossEntropy with the maximum as a constant.
func refVocabCE(x []float32, rows, cols, vocab int, target []int32, alpha float64, dy []float32) (loss, grad []float64) {
	loss, grad = make([]float64, rows), make([]float64, rows*cols)
	s := 0.0
	if alpha > 0 {
		s = alpha * float64(vocab) / float64(vocab-1)
	}
	for r := range rows {
		row := x[r*cols : r*cols+vocab]
		m := math.Inf(-1)
		var sumX float64
		for _, v := range row {
			m = math.Max(m, float64(v))
			sumX += float64(v)
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - m)
		}
		lse := m + math.Log(sum)
		tg := int(target[r])
		masked := tg < 0 || tg >= vocab
		ce := lse - m
		if !masked {
			ce = lse - float64(row[tg])
		}
		loss[r] = (1-s)*ce - s*(sumX/float64(vocab)-lse)
		d := float64(dy[r])
		for j, v := range row {
			g := math.Exp(float64(v)-lse) - s/float64(vocab)
			if j == tg && !masked {
				g -= 1 - s
			}
			grad[r*cols+j] = g * d
		}
	}
	return loss, grad
}

// ceLossDiff is max_i |a_i − b_i| / max(|b_i|, 1).
func ceLossDiff(a []float32, b []float64) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-b[i])/math.Max(math.Abs(b[i]), 1))
	}
	return d
}

// ceGradDiff is max_i |a_i − b_i| / max_i |b_i|.
func ceGradDiff(a []float32, b []float64) float64 {
	var d, scale float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-b[i]))
		scale = math.Max(scale, math.Abs(b[i]))
	}
	return d / math.Max(scale, 1e-30)
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// checkCE compares a run with the float64 reference within the tolerances.
func checkCE(t *testing.T, what string, got ceResult, loss, grad []float64) {
	t.Helper()
	if len(got.loss) != len(loss) || len(got.dlogits) != len(grad) {
		t.Fatalf("%s: got %d losses and %d gradients, want %d and %d", what, len(got.loss), len(got.dlogits), len(loss), len(grad))
	}
	dl, dg := ceLossDiff(got.loss, loss), ceGradDiff(got.dlogits, grad)
	t.Logf("%s: loss max rel diff %.2g, dlogits max rel diff %.2g", what, dl, dg)
	if dl > ceLossTol || math.IsNaN(dl) {
		t.Errorf("%s: loss differs from the reference by %.3g > %.3g", what, dl, ceLossTol)
	}
	if dg > ceGradTol || math.IsNaN(dg) {
		t.Errorf("%s: dlogits differ from the reference by %.3g > %.3g", what, dg, ceGradTol)
	}
}

// ceInputs returns logits [rows, cols] (N(0, std)), targets in [0, vocab)
// and an upstream gradient in [0.5, 1.5) with one zero.
func ceInputs(seed uint64, rows, cols, vocab int, std float64) (*tensor.Tensor, []int32, []float32) {
	x := randn(seed, std, rows, cols)
	g := rng.New(seed + 1)
	target := make([]int32, rows)
	for i := range target {
		target[i] = int32(g.Uint64n(uint64(vocab)))
	}
	dy := make([]float32, rows)
	for i := range dy {
		dy[i] = 0.5 + g.Float32()
	}
	dy[rows/2] = 0
	return x, target, dy
}

// nnCE runs nn.CrossEntropy on a copy of x [rows, V] and returns the loss
// and the logits' gradient for the upstream gradient dy.
func nnCE(t *testing.T, x *tensor.Tensor, target []int32, dy []float32) ceResult {
	t.Helper()
	tape := autograd.NewTape(context.Background())
	v := autograd.NewLeaf(x.Clone(), "logits", true)
	loss := nn.CrossEntropy(tape, v, target)
	if err := tape.Err(); err != nil {
		t.Fatal(err)
	}
	l := loss.Value.Clone()
	if err := autograd.Backward(tape, loss, tensor.FromSlice(append([]float32(nil), dy...), len(dy))); err != nil {
		t.Fatal(err)
	}
	return ceResult{loss: l.Data(), dlogits: v.Grad.Data()}
}

func TestVocabParallelCrossEntropyMatchesNN(t *testing.T) {
	const s, b, v = 6, 4, 64
	x, target, dy := ceInputs(11, s*b, v, v, 3)
	x = x.View(s, b, v) // leading dims are flattened
	want := nnCE(t, x.View(s*b, v), target, dy)
	loss64, grad64 := refVocabCE(x.Data(), s*b, v, v, target, 0, dy)
	checkCE(t, "nn.CrossEntropy", want, loss64, grad64)

	// One rank, with a nil group and with a group of one: bitwise nn.
	tape := autograd.NewTape(context.Background())
	xv := autograd.NewLeaf(x.Clone(), "logits", true)
	loss := VocabParallelCrossEntropy(tape, xv, target, CrossEntropyOptions{})
	if err := tape.Err(); err != nil {
		t.Fatal(err)
	}
	lossNil := loss.Value.Clone()
	if err := autograd.Backward(tape, loss, tensor.FromSlice(append([]float32(nil), dy...), len(dy))); err != nil {
		t.Fatal(err)
	}
	numtest.SameBits(t, "nil group: loss", lossNil.Data(), want.loss)
	numtest.SameBits(t, "nil group: dlogits", xv.Grad.Data(), want.dlogits)
	one := runVocabCE(t, 1, x, target, dy, 0, 0, 1, nil)
	numtest.SameBits(t, "1 rank: loss", one.loss, want.loss)
	numtest.SameBits(t, "1 rank: dlogits", one.dlogits, want.dlogits)

	for _, ws := range []int{2, 4} {
		got := runVocabCE(t, ws, x, target, dy, 0, 0, 1, nil)
		checkCE(t, fmt.Sprintf("%d ranks vs float64", ws), got, loss64, grad64)
		checkCE(t, fmt.Sprintf("%d ranks vs nn.CrossEntropy", ws), got, to64(want.loss), to64(want.dlogits))
	}
}

func TestVocabParallelCrossEntropyLabelSmoothing(t *testing.T) {
	const rows, v = 20, 64
	x, target, dy := ceInputs(21, rows, v, v, 2)
	target[1], target[5], target[9] = -1, v, 1000 // masked, as the reference masks them
	for _, alpha := range []float32{0, 0.1, 0.6} {
		loss64, grad64 := refVocabCE(x.Data(), rows, v, v, target, float64(alpha), dy)
		var first ceResult
		for _, ws := range []int{1, 2, 4} {
			got := runVocabCE(t, ws, x, target, dy, alpha, 0, 1, nil)
			checkCE(t, fmt.Sprintf("α=%g, %d ranks", alpha, ws), got, loss64, grad64)
			if ws == 1 {
				first = got
				continue
			}
			// The same for every TP size (the global formula).
			checkCE(t, fmt.Sprintf("α=%g, %d ranks vs 1 rank", alpha, ws), got, to64(first.loss), to64(first.dlogits))
		}
	}
}

func TestVocabParallelCrossEntropyPadding(t *testing.T) {
	const rows, padded = 16, 64
	for _, vocab := range []int{50, 40} { // at tp 4, V = 40 leaves rank 3 with padding only
		x, target, dy := ceInputs(31, rows, padded, vocab, 2)
		target[2] = int32(vocab) // a padding id: masked
		target[3] = padded - 1
		xd := x.Data()
		for r := range rows {
			for j := vocab; j < padded; j++ {
				xd[r*padded+j] = 30 + float32(j) // would dominate the softmax if counted
			}
		}
		unpadded := x.Narrow(1, 0, vocab).Contiguous()
		for _, alpha := range []float32{0, 0.1} {
			loss64, grad64 := refVocabCE(xd, rows, padded, vocab, target, float64(alpha), dy)
			// The unpadded model on one rank gives the same numbers.
			ref := runVocabCE(t, 1, unpadded, target, dy, alpha, 0, 1, nil)
			for _, ws := range []int{1, 2, 4} {
				got := runVocabCE(t, ws, x, target, dy, alpha, vocab, 1, nil)
				what := fmt.Sprintf("V=%d padded to %d, α=%g, %d ranks", vocab, padded, alpha, ws)
				checkCE(t, what, got, loss64, grad64)
				unpad := make([]float32, 0, rows*vocab)
				for r := range rows {
					row := got.dlogits[r*padded : (r+1)*padded]
					for j := vocab; j < padded; j++ {
						if math.Float32bits(row[j]) != 0 {
							t.Fatalf("%s: row %d padding column %d has gradient %v, want exactly 0", what, r, j, row[j])
						}
					}
					unpad = append(unpad, row[:vocab]...)
				}
				checkCE(t, what+" vs unpadded", ceResult{got.loss, unpad}, to64(ref.loss), to64(ref.dlogits))
			}
		}
	}
}

func TestVocabParallelCrossEntropyAllReduces(t *testing.T) {
	const rows, v = 8, 32
	x, target, dy := ceInputs(41, rows, v, v, 1)
	for _, c := range []struct {
		alpha float32
		want  []comm.ReduceOp
	}{
		{0, []comm.ReduceOp{comm.Max, comm.Sum, comm.Sum}},
		{0.1, []comm.ReduceOp{comm.Max, comm.Sum, comm.Sum, comm.Sum}},
	} {
		for _, ws := range []int{1, 2, 4} {
			var ops []comm.ReduceOp
			runVocabCE(t, ws, x, target, dy, c.alpha, 0, 1, &ops)
			want := c.want
			if ws == 1 {
				want = nil
			}
			if fmt.Sprint(ops) != fmt.Sprint(want) {
				t.Errorf("α=%g, %d ranks: all-reduces %v, want %v", c.alpha, ws, ops, want)
			}
		}
	}
}

func TestVocabParallelCrossEntropyWorkers(t *testing.T) {
	// 64 rows × 512 columns per rank: enough work for two goroutines.
	const rows, v = 64, 1024
	x, target, dy := ceInputs(51, rows, v, v, 2)
	for _, alpha := range []float32{0, 0.1} {
		one := runVocabCE(t, 2, x, target, dy, alpha, 0, 1, nil)
		two := runVocabCE(t, 2, x, target, dy, alpha, 0, 2, nil)
		numtest.SameBits(t, fmt.Sprintf("α=%g: loss with 2 workers", alpha), two.loss, one.loss)
		numtest.SameBits(t, fmt.Sprintf("α=%g: dlogits with 2 workers", alpha), two.dlogits, one.dlogits)
		loss64, grad64 := refVocabCE(x.Data(), rows, v, v, target, float64(alpha), dy)
		checkCE(t, fmt.Sprintf("α=%g, 2 ranks × 2 workers", alpha), two, loss64, grad64)
	}
}

func TestVocabParallelCrossEntropyErrors(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		name    string
		rows    int
		targets int
		opts    CrossEntropyOptions
		want    string
	}{
		{"negative smoothing", 4, 4, CrossEntropyOptions{LabelSmoothing: -0.1}, "label smoothing -0.1 is outside [0, 1)"},
		{"smoothing 1", 4, 4, CrossEntropyOptions{LabelSmoothing: 1}, "label smoothing 1 is outside [0, 1)"},
		{"NaN smoothing", 4, 4, CrossEntropyOptions{LabelSmoothing: nan}, "outside [0, 1)"},
		{"vocab too large", 4, 4, CrossEntropyOptions{VocabSize: 9}, "VocabSize 9 is outside [1, 8]"},
		{"negative vocab", 4, 4, CrossEntropyOptions{VocabSize: -1}, "VocabSize -1"},
		{"smoothing one word", 4, 4, CrossEntropyOptions{VocabSize: 1, LabelSmoothing: 0.1}, "at least 2"},
		{"target count", 4, 3, CrossEntropyOptions{}, "4 rows but 3 targets"},
	} {
		for _, ws := range []int{1, 2} {
			runRanks(t, ws, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
				opts := c.opts
				opts.Group = g
				x := autograd.NewLeaf(randn(1, 1, c.rows, 8/ws), "logits", true)
				y := VocabParallelCrossEntropy(tape, x, make([]int32, c.targets), opts)
				err := tape.Err()
				if err == nil || y.Value != nil {
					return fmt.Errorf("%s: no error", c.name)
				}
				if !strings.Contains(err.Error(), c.want) {
					return fmt.Errorf("%s: error %q does not contain %q", c.name, err, c.want)
				}
				return nil
			})
		}
	}
}

// TestVocabParallelCrossEntropyMatchesTorch compares with PyTorch's
// float64 computation (tools/torchref/tp_ce_ref.py, testdata/tp_ce): the
// fixture's 50-word vocabulary as it is (1 and 2 ranks) and padded to 64
// with large padding logits (1, 2 and 4 ranks), with and without label
// smoothing, masked targets included.
func TestVocabParallelCrossEntropyMatchesTorch(t *testing.T) {
	f, err := safetensors.ReadFile(filepath.Join("..", "testdata", "tp_ce", "ce.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) []float32 {
		tn, ok := f.Get(name)
		if !ok {
			t.Fatalf("fixture: no tensor %q", name)
		}
		d, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	const vocab, padded, alpha = 50, 64, 0.1
	logits, dy := get("logits"), get("dloss")
	rows := len(dy)
	if len(logits) != rows*vocab {
		t.Fatalf("fixture: %d logits for %d rows of %d", len(logits), rows, vocab)
	}
	target := make([]int32, rows)
	for i, v := range get("targets") {
		target[i] = int32(v)
	}
	padX := tensor.New(rows, padded)
	for r := range rows {
		row := padX.Data()[r*padded : (r+1)*padded]
		copy(row, logits[r*vocab:(r+1)*vocab])
		for j := vocab; j < padded; j++ {
			row[j] = 100
		}
	}
	x := tensor.FromSlice(logits, rows, vocab)
	for _, c := range []struct {
		alpha float32
		tag   string
	}{{0, "a0"}, {alpha, "a01"}} {
		wantLoss, wantGrad := to64(get("loss_"+c.tag)), to64(get("dlogits_"+c.tag))
		for _, ws := range []int{1, 2} {
			got := runVocabCE(t, ws, x, target, dy, c.alpha, 0, 1, nil)
			checkCE(t, fmt.Sprintf("torch %s, %d ranks", c.tag, ws), got, wantLoss, wantGrad)
		}
		for _, ws := range []int{1, 2, 4} {
			got := runVocabCE(t, ws, padX, target, dy, c.alpha, vocab, 1, nil)
			unpad := make([]float32, 0, rows*vocab)
			for r := range rows {
				unpad = append(unpad, got.dlogits[r*padded:r*padded+vocab]...)
			}
			checkCE(t, fmt.Sprintf("torch %s, padded, %d ranks", c.tag, ws), ceResult{got.loss, unpad}, wantLoss, wantGrad)
		}
	}
}

// BenchmarkVocabParallelCrossEntropy measures forward + backward on one
// rank: "fused" is nn.CrossEntropy's kernels (no smoothing), "smoothed"
// the general vocabulary-parallel path.
func BenchmarkVocabParallelCrossEntropy(b *testing.B) {
	const rows, v = 256, 8192
	x, target, dy := ceInputs(61, rows, v, v, 2)
	dyT := tensor.FromSlice(dy, rows)
	for _, c := range []struct {
		name  string
		alpha float32
	}{{"fused", 0}, {"smoothed", 0.1}} {
		b.Run(c.name, func(b *testing.B) {
			tape := autograd.NewTape(context.Background())
			buf := x.Clone()
			b.SetBytes(int64(4 * rows * v))
			for b.Loop() {
				buf.CopyFrom(x)
				xv := autograd.NewLeaf(buf, "logits", true)
				loss := VocabParallelCrossEntropy(tape, xv, target, CrossEntropyOptions{LabelSmoothing: c.alpha})
				if err := autograd.Backward(tape, loss, dyT); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
