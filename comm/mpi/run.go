//go:build mpi

package mpi

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gotron/gotron/comm"
)

// Init initialises MPI for this process with MPI_THREAD_MULTIPLE (goroutines
// call MPI concurrently), unless it is already initialised. It fails when
// the library gives a lower thread level or MPI was already finalised.
// NewWorld calls it; call it yourself only to fail early.
func Init() error { return initThreadMultiple() }

// Finalize ends MPI for this process (MPI_Finalize). Close every World
// first. It is a collective over every process of the job: each must call
// it. A no-op when MPI is not initialised.
func Finalize() error {
	if !mpiInitialized() {
		return nil
	}
	return mpiFinalize()
}

// Abort terminates every process of the job with the exit code
// (MPI_Abort on MPI_COMM_WORLD). It is the last resort of a main whose
// World.Run returned a *RunError with Unreached set: some process never
// came back to agree on the outcome, so Finalize would wait for it forever.
// When MPI is not initialised, Abort calls os.Exit(code).
func Abort(code int) {
	if mpiInitialized() {
		mpiAbort(code)
	}
	os.Exit(code)
}

// Run is the whole life of an MPI program's ranks: it initialises MPI, runs
// fn on this process's world group (World.Run: failures reach every rank
// promptly), then closes the world and finalises MPI. It returns fn's
// outcome as World.Run does: nil when every rank's fn returned nil.
//
// When some rank never came back to agree on the outcome (it is stuck
// outside any gotron call), Run writes its error to standard error and ends
// the job with MPI_Abort(1): the last resort, taken only after the other
// ranks were told of the failure, because MPI_Finalize would wait for the
// missing rank forever.
func Run(ctx context.Context, opts comm.Options, fn func(ctx context.Context, g comm.Group) error) error {
	return RunReport(ctx, opts, fn, nil)
}

// RunReport is Run, calling report with fn's outcome (on every rank, the
// same one) before MPI is finalised. A main that prints the outcome there
// has every rank's line out before any process exits: once one process
// exits with a failure status, mpirun kills the others, and a line
// printed after Run returns can be lost.
func RunReport(ctx context.Context, opts comm.Options, fn func(ctx context.Context, g comm.Group) error, report func(error)) error {
	w, err := NewWorld(opts)
	if err != nil {
		return err
	}
	err = w.Run(ctx, fn)
	if re := (*RunError)(nil); errors.As(err, &re) && re.Unreached {
		fmt.Fprintf(os.Stderr, "mpi: rank %d: %v\nmpi: aborting the job: not every rank could be reached to finish cleanly\n", w.rank, err)
		Abort(1)
	}
	if report != nil {
		report(err)
	}
	cerr := errors.Join(w.Close(), Finalize())
	switch {
	case cerr == nil:
		return err
	case err == nil:
		return cerr
	}
	return errors.Join(err, cerr)
}
