package kernels

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// torchReference is testdata/torch_reference.json, written by testdata/torch_reference.py
// with PyTorch: inputs and torch's outputs, every float32 as its bit pattern.
type torchReference struct {
	TorchVersion string `json:"torch_version"`
	Adam         []struct {
		Name                  string
		LR, Beta1, Beta2, Eps float64
		WeightDecay           float64 `json:"weight_decay"`
		Decoupled             bool
		Steps                 int
		P0                    f32s
		Grads                 []f32s
		P, M, V               f32s
	}
	SGD []struct {
		Name         string
		LR, Momentum float64
		WeightDecay  float64 `json:"weight_decay"`
		Steps        int
		P0           f32s
		Grads        []f32s
		P, Buf       f32s
	} `json:"sgd"`
	Gelu      struct{ X, Y, Dy, Dx f32s }
	LayerNorm struct {
		Rows, Cols                 int
		Eps                        float64
		X, W, B, Y, Dy, Dx, Dw, Db f32s
	} `json:"layernorm"`
	CrossEntropy struct {
		Rows, Vocab                  int
		Logits, Loss, Dloss, Dlogits f32s
		Labels                       []int32
	} `json:"cross_entropy"`
	CausalSoftmax struct {
		S                 int
		Scale             float64
		Scores, P, Dp, Ds f32s
	} `json:"causal_softmax"`
	DropoutScale [][2]float64 `json:"dropout_scale"` // [p, bits of the kept value of 1.0]
	Half         struct {
		X         f32s
		BF16, F16 []uint16
	}
}

// f32s decodes a JSON array of float32 bit patterns.
type f32s []float32

func (f *f32s) UnmarshalJSON(b []byte) error {
	var u []uint32
	if err := json.Unmarshal(b, &u); err != nil {
		return err
	}
	*f = make([]float32, len(u))
	for i, v := range u {
		(*f)[i] = math.Float32frombits(v)
	}
	return nil
}

func loadTorch(t *testing.T) *torchReference {
	t.Helper()
	b, err := os.ReadFile("testdata/torch_reference.json")
	if err != nil {
		t.Fatalf("reading the torch fixture: %v (regenerate with /usr/bin/python3 torch_reference.py in testdata/)", err)
	}
	var ref torchReference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("decoding testdata/torch_reference.json: %v", err)
	}
	return &ref
}

// maxULP returns the largest distance between got and want in float32 ulps of want (with an
// absolute floor, so that values near zero are measured against floor's ulp).
func maxULP(got, want []float32, floor float32) (worst float64, at int) {
	at = -1
	for i := range got {
		w := want[i]
		a := max(float32(math.Abs(float64(w))), floor)
		ulp := float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
		if d := math.Abs(float64(got[i])-float64(w)) / ulp; d > worst || (math.IsNaN(d) && got[i] == got[i]) {
			worst, at = d, i
		}
	}
	return worst, at
}

func checkULP(t *testing.T, what string, got, want []float32, floor float32, limit float64) {
	t.Helper()
	worst, at := maxULP(got, want, floor)
	if worst > limit {
		t.Errorf("%s vs torch: %.1f ulp at [%d]: %v, torch %v (limit %v)", what, worst, at, got[at], want[at], limit)
	} else {
		t.Logf("%s vs torch: max %.2f ulp", what, worst)
	}
}

// TestSGDMatchesTorch: SGDStep over five steps, without momentum, with
// it, and with it and weight decay, gives torch.optim.SGD's parameters and
// momentum buffer bit for bit.
func TestSGDMatchesTorch(t *testing.T) {
	ref := loadTorch(t)
	if len(ref.SGD) != 3 {
		t.Fatalf("%d SGD cases in the fixture, want 3", len(ref.SGD))
	}
	for _, c := range ref.SGD {
		h := SGDHyper{LR: float32(c.LR), Momentum: float32(c.Momentum), WeightDecay: float32(c.WeightDecay)}
		p := clone(c.P0)
		var buf []float32
		if c.Momentum != 0 {
			buf = make([]float32, len(p))
		}
		for s := 0; s < c.Steps; s++ {
			SGDStep(p, c.Grads[s], buf, h)
		}
		checkULP(t, c.Name+" param", p, c.P, 0, 0)
		if buf != nil {
			checkULP(t, c.Name+" momentum_buffer", buf, c.Buf, 0, 0)
		}
	}
}

func TestAdamMatchesTorch(t *testing.T) {
	ref := loadTorch(t)
	for _, c := range ref.Adam {
		h := AdamHyper{LR: float32(c.LR), Beta1: float32(c.Beta1), Beta2: float32(c.Beta2), Eps: float32(c.Eps),
			WeightDecay: float32(c.WeightDecay), Decoupled: c.Decoupled}
		p := clone(c.P0)
		m, v := make([]float32, len(p)), make([]float32, len(p))
		for s := 0; s < c.Steps; s++ {
			h.Step = s + 1
			AdamStep(p, c.Grads[s], m, v, h)
		}
		checkULP(t, c.Name+" param", p, c.P, 0, 0)
		checkULP(t, c.Name+" exp_avg", m, c.M, 0, 0)
		checkULP(t, c.Name+" exp_avg_sq", v, c.V, 0, 0)
	}
}

// The other kernels are not bitwise torch (different, equally valid evaluation orders).
// Against torch they are held to a few ulps at the scale of the data (floor: the ulp of a
// unit-size value where results are small differences of unit-size terms), and against the
// float64 reference loops they must be at least about as accurate as torch itself.

// checkAccuracy fails unless ours' worst absolute error against exact is within twice torch's
// worst error plus slack (both measured on the same inputs).
func checkAccuracy(t *testing.T, what string, ours, torch []float32, exact []float64, slack float64) {
	t.Helper()
	var eo, et float64
	for i, x := range exact {
		eo = math.Max(eo, math.Abs(float64(ours[i])-x))
		et = math.Max(et, math.Abs(float64(torch[i])-x))
	}
	if eo > 2*et+slack {
		t.Errorf("%s: max |error| %.3g, torch's %.3g: less accurate than torch", what, eo, et)
	} else {
		t.Logf("%s: max |error| vs float64 %.3g (torch %.3g)", what, eo, et)
	}
}

func TestGeluMatchesTorch(t *testing.T) {
	g := loadTorch(t).Gelu
	y, dx := make([]float32, len(g.X)), make([]float32, len(g.X))
	GeluForward(y, g.X)
	GeluBackward(dx, g.Dy, g.X)
	checkULP(t, "gelu", y, g.Y, 1, 2)
	// torch's gelu' cancels in 1 + tanh(u) near x ≈ −5: its own error there is ≈ |x·u'|·2^-24·|dy|.
	checkULP(t, "gelu backward", dx, g.Dx, 1, 24)
	wy, wdx := make([]float64, len(g.X)), make([]float64, len(g.X))
	for i, x := range g.X {
		wy[i] = refGelu(float64(x))
		wdx[i] = float64(g.Dy[i]) * refGeluGrad(float64(x))
	}
	checkAccuracy(t, "gelu", y, g.Y, wy, 1e-7)
	checkAccuracy(t, "gelu backward", dx, g.Dx, wdx, 1e-7)
}

func TestLayerNormMatchesTorch(t *testing.T) {
	l := loadTorch(t).LayerNorm
	y := make([]float32, len(l.X))
	mean, rstd := make([]float32, l.Rows), make([]float32, l.Rows)
	LayerNormForward(y, mean, rstd, l.X, l.W, l.B, l.Rows, l.Cols, float32(l.Eps))
	checkULP(t, "layernorm", y, l.Y, 1, 4)
	dx, dw, db := make([]float32, len(l.X)), make([]float32, l.Cols), make([]float32, l.Cols)
	LayerNormBackward(dx, dw, db, l.Dy, l.X, mean, rstd, l.W, l.Rows, l.Cols)
	checkULP(t, "layernorm dx", dx, l.Dx, 1, 4)
	checkULP(t, "layernorm dw", dw, l.Dw, 1, 8)
	checkULP(t, "layernorm db", db, l.Db, 1, 4)

	wy, _, _ := refLayerNorm(to64(l.X), to64(l.W), to64(l.B), l.Rows, l.Cols, l.Eps)
	wdx, wdw, wdb := refLayerNormBackward(to64(l.Dy), to64(l.X), to64(l.W), l.Rows, l.Cols, l.Eps)
	checkAccuracy(t, "layernorm", y, l.Y, wy, 1e-7)
	checkAccuracy(t, "layernorm dx", dx, l.Dx, wdx, 1e-7)
	checkAccuracy(t, "layernorm dw", dw, l.Dw, wdw, 1e-7)
	checkAccuracy(t, "layernorm db", db, l.Db, wdb, 1e-7)
}

func TestCrossEntropyMatchesTorch(t *testing.T) {
	c := loadTorch(t).CrossEntropy
	loss, lse := make([]float32, c.Rows), make([]float32, c.Rows)
	CrossEntropyForward(loss, lse, c.Logits, c.Labels, c.Rows, c.Vocab)
	checkULP(t, "cross entropy", loss, c.Loss, 1, 2)
	d := make([]float32, len(c.Logits))
	CrossEntropyBackward(d, c.Logits, lse, c.Labels, c.Dloss, c.Rows, c.Vocab)
	checkULP(t, "cross entropy backward", d, c.Dlogits, 1e-2, 4)

	wl, _ := refCrossEntropy(to64(c.Logits), c.Labels, c.Rows, c.Vocab)
	wd := refCrossEntropyGrad(to64(c.Logits), c.Labels, to64(c.Dloss), c.Rows, c.Vocab)
	checkAccuracy(t, "cross entropy", loss, c.Loss, wl, 1e-7)
	checkAccuracy(t, "cross entropy backward", d, c.Dlogits, wd, 1e-8)
}

func TestCausalSoftmaxMatchesTorch(t *testing.T) {
	c := loadTorch(t).CausalSoftmax
	p := clone(c.Scores)
	lse := make([]float32, c.S)
	CausalSoftmaxForward(p, c.S, c.S, float32(c.Scale), lse)
	checkULP(t, "causal softmax", p, c.P, 1e-3, 2)
	r := clone(c.Scores)
	CausalSoftmaxRecompute(r, c.S, c.S, float32(c.Scale), lse)
	checkULP(t, "causal softmax recompute", r, c.P, 1e-3, 4)
	ds := make([]float32, len(p))
	SoftmaxBackwardRows(ds, p, c.Dp, c.S, c.S, float32(c.Scale))
	checkULP(t, "causal softmax backward", ds, c.Ds, 0.1, 4) // cancellation in dp − Σp·dp

	wp, _ := refCausalSoftmax(to64(c.Scores), c.S, c.S, c.Scale)
	checkAccuracy(t, "causal softmax", p, c.P, wp, 1e-8)
	checkAccuracy(t, "causal softmax recompute", r, c.P, wp, 1e-8)
	wds := refSoftmaxBackward(wp, to64(c.Dp), c.S, c.Scale)
	checkAccuracy(t, "causal softmax backward", ds, c.Ds, wds, 1e-8)
}

func TestHalfMatchesTorch(t *testing.T) {
	h := loadTorch(t).Half
	bf, f16 := make([]uint16, len(h.X)), make([]uint16, len(h.X))
	F32ToBF16(bf, h.X)
	F32ToF16(f16, h.X)
	for i, x := range h.X {
		if bf[i] != h.BF16[i] {
			t.Errorf("bf16(%v) = %#04x, torch %#04x", x, bf[i], h.BF16[i])
		}
		if f16[i] != h.F16[i] {
			t.Errorf("f16(%v) = %#04x, torch %#04x", x, f16[i], h.F16[i])
		}
	}
}

func TestDropoutScaleMatchesTorch(t *testing.T) {
	for _, c := range loadTorch(t).DropoutScale {
		p, want := float32(c[0]), math.Float32frombits(uint32(c[1]))
		x := []float32{1, 1, 1, 1, 1, 1, 1, 1}
		y, mask := make([]float32, len(x)), make([]byte, len(x))
		Dropout(y, mask, x, p, rng.New(1))
		dx := make([]float32, len(x))
		DropoutBackward(dx, x, mask, p)
		for i := range y {
			if mask[i] == 1 && (y[i] != want || dx[i] != want) {
				t.Errorf("p = %v: kept 1.0 became %v forward, %v backward; torch %v", p, y[i], dx[i], want)
				break
			}
		}
	}
}
