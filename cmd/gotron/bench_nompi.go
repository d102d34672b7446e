//go:build !mpi

package main

import (
	"context"
	"errors"
	"io"

	"github.com/gotron/gotron/bench"
)

func benchMPI(context.Context, io.Writer, bench.Options) error {
	return errors.New("--backend mpi: this gotron was built without Open MPI; build it with `make build-mpi` (go build -tags mpi) and run it under mpirun: mpirun -np 2 bin/gotron-mpi bench --backend mpi")
}
