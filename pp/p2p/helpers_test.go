package p2p

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor"
)

// testTimeout bounds every test world: a hang fails the test with an error
// naming what waits, instead of blocking the test binary.
const testTimeout = 30 * time.Second

// runWorld runs fn on every rank of a p-rank local world and returns the
// world's error.
func runWorld(t *testing.T, p int, fn func(ctx context.Context, g comm.Group) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return local.NewWorld(p, comm.Options{Timeout: testTimeout}).Run(ctx, fn)
}

// runPipeline runs fn on every stage of a p-stage pipeline (the world
// group) with a communicator built from cfg, and returns the world's error.
func runPipeline(t *testing.T, p int, cfg Config, fn func(ctx context.Context, c *Communicator) error) error {
	t.Helper()
	return runWorld(t, p, func(ctx context.Context, g comm.Group) error {
		c, err := New(g, cfg)
		if err != nil {
			return err
		}
		return fn(ctx, c)
	})
}

// mustRun is runPipeline failing the test on error.
func mustRun(t *testing.T, p int, cfg Config, fn func(ctx context.Context, c *Communicator) error) {
	t.Helper()
	if err := runPipeline(t, p, cfg, fn); err != nil {
		t.Fatal(err)
	}
}

// f32 is a float32 pipeline configuration, batched or not.
func f32(batched bool) Config {
	return Config{PipelineDType: config.Float32, BatchP2PComm: batched, BatchP2PSync: true}
}

// modes names the two op orders for sub-tests.
var modes = []struct {
	name    string
	batched bool
}{{"batched", true}, {"unbatched", false}}

// The payloads a stage sends: kind tells an activation from a gradient and
// one step from another, so a crossed or misrouted message is seen.
const (
	fwd = 1 // an activation, sent to the next stage
	bwd = 2 // a gradient, sent to the previous stage
)

// payload returns the tensor stage `from` sends as `kind` at step `step`:
// element i is from·1000 + kind·100 + step·10 + i/7, values with bits below
// bfloat16's precision.
func payload(from, kind, step int, shape ...int) *tensor.Tensor {
	t := tensor.New(shape...)
	for i := range t.Data() {
		t.Data()[i] = float32(from*1000+kind*100+step*10) + float32(i)/7
	}
	return t
}

// same reports whether got has want's shape and bitwise-equal values.
func same(got, want *tensor.Tensor) error {
	if got == nil {
		return fmt.Errorf("got nil, want %v", want.Shape())
	}
	if !slices.Equal(got.Shape(), want.Shape()) {
		return fmt.Errorf("got shape %v, want %v", got.Shape(), want.Shape())
	}
	for i, v := range want.Data() {
		if g := got.Data()[i]; g != v {
			return fmt.Errorf("element %d: got %v, want %v", i, g, v)
		}
	}
	return nil
}

// expect checks a received tensor against the payload it should be,
// naming the stage and what was received.
func expect(c *Communicator, what string, got, want *tensor.Tensor) error {
	if err := same(got, want); err != nil {
		return fmt.Errorf("stage %d: %s: %w", c.Stage(), what, err)
	}
	return nil
}

// expectNil checks that a no-op call returned nothing.
func expectNil(c *Communicator, what string, got *tensor.Tensor) error {
	if got != nil {
		return fmt.Errorf("stage %d: %s: got %v, want nil (a no-op on this stage)", c.Stage(), what, got.Shape())
	}
	return nil
}

// rankErrors returns each rank's error from a local world's Run error.
func rankErrors(t *testing.T, err error) []error {
	t.Helper()
	var re *local.RunError
	if !errors.As(err, &re) {
		t.Fatalf("want a *local.RunError, got %T: %v", err, err)
	}
	return re.Errs
}
