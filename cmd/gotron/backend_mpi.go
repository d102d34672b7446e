//go:build mpi

package main

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/mpi"
	"github.com/gotron/gotron/train"
)

// mpiBuilt says whether this binary can run under mpirun.
const mpiBuilt = true

// runMPI runs this process as one rank of an mpirun job. The cores of a
// machine are divided among the job's processes on it
// (OMPI_COMM_WORLD_LOCAL_SIZE).
func runMPI(ctx context.Context, a train.Args, o train.Options) (*train.Result, error) {
	local := 1
	if n, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE")); err == nil && n > 0 {
		local = n
	}
	if a.Threads == 0 {
		a.Threads = runtime.NumCPU()
	}
	var res *train.Result
	rank := -1
	timeout := time.Duration(a.DistributedTimeoutMinutes * float64(time.Minute))
	err := mpi.Run(ctx, comm.Options{Timeout: timeout}, func(ctx context.Context, g comm.Group) error {
		rank = g.Rank()
		if g.Rank() != 0 {
			o.Out, o.Progress = nil, nil
		}
		r, err := train.RunRank(ctx, g, a, o, local)
		res = r
		return err
	})
	if err != nil && rank > 0 && ctx.Err() == nil {
		// Every rank returns the same failure (mpi.World.Run agrees on its
		// root cause): rank 0 says it, the others only exit with its status.
		return res, &exitError{code: 1}
	}
	return res, err
}
