//go:build !mpi

package main

import (
	"context"
	"errors"

	"github.com/gotron/gotron/train"
)

// mpiBuilt says whether this binary can run under mpirun.
const mpiBuilt = false

func runMPI(context.Context, train.Args, train.Options) (*train.Result, error) {
	return nil, errors.New("--backend mpi: this gotron was built without Open MPI; build it with `make build-mpi` (go build -tags mpi) and run it under mpirun")
}
