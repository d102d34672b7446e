package tp

import (
	"context"
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
