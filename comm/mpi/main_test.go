//go:build mpi

package mpi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
)

// The tests run under mpirun, one process per rank (run_tests.sh); every
// process runs the same tests in the same order, and each test that needs
// the other ranks builds a World of its own. Run alone, the binary is a
// world of one process.
//
// With GOTRON_MPI_MAIN set, the binary runs a whole program through the
// package-level Run instead (see mainScenario), so that run_tests.sh can
// check exit codes and MPI_Finalize/MPI_Abort end to end.
func TestMain(m *testing.M) {
	if s := os.Getenv("GOTRON_MPI_MAIN"); s != "" {
		os.Exit(mainScenario(s))
	}
	if err := Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if err := Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// mainScenario is a main function built on RunReport:
//
//	ok     every rank all-reduces and returns nil: exit 0 everywhere
//	fail   the last rank fails while the others wait in a Barrier: every
//	       rank prints the failure (naming that rank) and exits 1
//	stuck  rank 0 fails while the last rank ignores everything and never
//	       returns: the others cannot agree on the outcome, and Run ends
//	       the job with MPI_Abort after the 2 s timeout
func mainScenario(s string) int {
	last := -1
	err := RunReport(context.Background(), comm.Options{Timeout: 2 * time.Second}, func(ctx context.Context, g comm.Group) error {
		last = g.Size() - 1
		x := []int64{int64(g.Rank())}
		if err := g.AllReduce(ctx, comm.I64(x), comm.Sum); err != nil {
			return err
		}
		switch {
		case s == "fail" && g.Rank() == last:
			return errors.New("scenario failure")
		case s == "stuck" && g.Rank() == last:
			block := make(chan struct{})
			<-block // never closed: a rank stuck outside gotron
		case s == "stuck" && g.Rank() == 0:
			return errors.New("scenario failure")
		}
		return g.Barrier(ctx)
	}, func(err error) {
		// Printed before MPI is finalised: every rank's line is out
		// before a failing process exits and mpirun ends the job.
		if err != nil {
			fmt.Printf("scenario %s: %v\n", s, err)
		} else {
			fmt.Printf("scenario %s: ok (last rank %d)\n", s, last)
		}
	})
	if err != nil {
		return 1
	}
	return 0
}

// worldSize returns the number of processes, failing t when MPI cannot
// say.
func worldSize(t testing.TB) int {
	_, n, err := worldRankSize()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
