package main

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gotron/gotron/train"
)

// TestCkptConvertKeepsContextParallel: a CP 2 checkpoint (dropout on)
// converted to the whole-tensor form and back records context parallel 2
// again, and a CP 2 run resumed from it continues every generator stream:
// its losses are the bits of a run resumed from the original.
func TestCkptConvertKeepsContextParallel(t *testing.T) {
	args := func() train.Args {
		a := ckptArgs()
		a.Model.TensorModelParallelSize, a.Model.ContextParallelSize = 1, 2
		a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
		return a
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	a := args()
	a.Save = dir
	if _, err := train.Run(context.Background(), a, train.Options{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	whole, back := filepath.Join(t.TempDir(), "whole"), filepath.Join(t.TempDir(), "back")
	for _, c := range [][]string{{"--to-whole", dir, whole}, {"--from-whole", whole, back}} {
		if out, err := run(t, append([]string{"ckpt", "convert"}, c...)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if l := openManifest(t, back).Layout; l.ContextParallel() != 2 || l.DP != 1 {
		t.Fatalf("converted layout %+v, want context parallel 2, data parallel 1", l)
	}
	resume := func(load string) []float64 {
		a := args()
		a.Load, a.TrainIters = load, 5
		res, err := train.Run(context.Background(), a, train.Options{Out: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		return res.Losses
	}
	if want, got := resume(dir), resume(back); !slices.Equal(got, want) {
		t.Errorf("resumed from the round trip: losses %v, from the original %v", got, want)
	}
}
