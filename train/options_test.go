package train

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// TestPerTokenLossMatchesMeanLoss: with full loss masks every micro-batch
// has the same token count, so normalising by the global token count
// (--calculate-per-token-loss) gives the same training as averaging
// micro-batch means, on one rank and on two.
func TestPerTokenLossMatchesMeanLoss(t *testing.T) {
	ref, err := Run(context.Background(), mockArgs(10), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, world := range []int{1, 2} {
		a := mockArgs(10)
		a.WorldSize = world
		a.Model.CalculatePerTokenLoss = true
		res, err := Run(context.Background(), a, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range ref.Losses {
			if e := relErr(res.Losses[i], ref.Losses[i]); e > 1e-6 {
				t.Errorf("world %d, iteration %d: per-token loss %.9f, mean loss %.9f (relative %.2g)", world, i+1, res.Losses[i], ref.Losses[i], e)
			}
		}
	}
}

// TestDumpGradsMatchesPyTorch writes --dump-grads on the fixture's first
// step and compares the file with PyTorch's gradients (1e-4 relative per
// parameter).
func TestDumpGradsMatchesPyTorch(t *testing.T) {
	a, _, _ := fixtureArgs(t, "gpt_ref")
	wantPath := filepath.Join(filepath.Dir(a.LoadInit), "grads.safetensors")
	a.TrainIters = 1
	a.DumpGrads = filepath.Join(t.TempDir(), "grads.safetensors")
	if _, err := Run(context.Background(), a, Options{}); err != nil {
		t.Fatal(err)
	}
	got, err := safetensors.ReadFile(a.DumpGrads)
	if err != nil {
		t.Fatal(err)
	}
	want, err := safetensors.ReadFile(wantPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("%d tensors, PyTorch has %d", len(got.Tensors), len(want.Tensors))
	}
	for _, w := range want.Tensors {
		g, ok := got.Get(w.Name)
		if !ok {
			t.Fatalf("no %s in the dump", w.Name)
		}
		gv, _ := g.Float32()
		wv, _ := w.Float32()
		var d, n float64
		for i := range wv {
			e := float64(gv[i] - wv[i])
			d += e * e
			n += float64(wv[i]) * float64(wv[i])
		}
		if r := math.Sqrt(d / math.Max(n, 1e-30)); r > 1e-4 {
			t.Errorf("%s: relative difference %.3g", w.Name, r)
		}
	}
}
