//go:build mpi

package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/gotron/gotron/bench"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/mpi"
)

// benchMPI runs the benchmark as one rank of an mpirun job; rank 0 writes
// the results to w. The cores of a machine are divided among the job's
// processes on it (OMPI_COMM_WORLD_LOCAL_SIZE).
func benchMPI(ctx context.Context, w io.Writer, o bench.Options) error {
	local := 1
	if n, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE")); err == nil && n > 0 {
		local = n
	}
	return mpi.Run(ctx, comm.Options{Timeout: time.Hour}, func(ctx context.Context, g comm.Group) error {
		return bench.RunRank(ctx, g, w, o, local)
	})
}
