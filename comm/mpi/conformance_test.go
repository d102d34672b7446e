//go:build mpi

package mpi

import (
	"context"
	"testing"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/commtest"
)

// suiteWorld adapts a World to commtest.World: each case runs in a fresh
// World, closed after its Run.
type suiteWorld struct {
	w   *World
	err error
}

func (s suiteWorld) Run(ctx context.Context, fn func(ctx context.Context, g comm.Group) error) error {
	if s.err != nil {
		return s.err
	}
	err := s.w.Run(ctx, fn)
	if cerr := s.w.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

func TestConformance(t *testing.T) {
	size := worldSize(t)
	commtest.Run(t, commtest.Backend{
		NewWorld: func(n int, opts comm.Options) commtest.World {
			if n != size {
				return nil
			}
			w, err := NewWorld(opts)
			return suiteWorld{w: w, err: err}
		},
		Sizes:      []int{size},
		Failures:   true,
		Mismatches: true,
	})
}
