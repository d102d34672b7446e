package tp

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// runRanks runs fn on n in-process ranks (the whole world is the
// tensor-parallel group) under a deadline, and fails the test with the
// first rank's error.
func runRanks(t *testing.T, n int, fn func(ctx context.Context, g comm.Group, tape *autograd.Tape) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := local.NewWorld(n, comm.Options{Timeout: 30 * time.Second}).Run(ctx, func(ctx context.Context, g comm.Group) error {
		return fn(ctx, g, autograd.NewTape(ctx))
	})
	if err != nil {
		t.Fatalf("%d ranks: %v", n, err)
	}
}

// randn returns a tensor of N(0, std) values drawn from seed.
func randn(seed uint64, std float64, shape ...int) *tensor.Tensor {
	x := tensor.New(shape...)
	rng.New(seed).FillNormal(x.Data(), 0, std)
	return x
}

// sameBits fails unless a and b are bitwise equal.
func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: lengths %d and %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d is %v, want %v (bitwise)", what, i, a[i], b[i])
		}
	}
}

// closeRel fails unless ‖a−b‖/‖b‖ ≤ tol.
func closeRel(t *testing.T, what string, a, b []float32, tol float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: lengths %d and %d", what, len(a), len(b))
	}
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	if r := math.Sqrt(num / math.Max(den, 1e-30)); r > tol || math.IsNaN(r) {
		t.Fatalf("%s: relative difference %.3g > %.3g", what, r, tol)
	}
}
