package local_test

import (
	"testing"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/commtest"
	"github.com/gotron/gotron/comm/local"
)

func backend() commtest.Backend {
	return commtest.Backend{
		NewWorld:   func(n int, opts comm.Options) commtest.World { return local.NewWorld(n, opts) },
		Sizes:      []int{1, 2, 3, 4},
		Failures:   true,
		Mismatches: true,
	}
}

func TestConformance(t *testing.T) { commtest.Run(t, backend()) }
