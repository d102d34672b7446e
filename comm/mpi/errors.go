//go:build mpi

package mpi

import (
	"errors"
	"fmt"

	"github.com/gotron/gotron/comm"
)

// RunError is World.Run's error: the earliest failure of the world, the same
// on every rank, with this rank's own error beside it.
type RunError struct {
	Rank int   // world rank of the earliest failure
	Err  error // its error, the root cause: a *RemoteError on other ranks
	// ThisRank and ThisErr are this process's rank and its fn's error (nil
	// when fn returned nil).
	ThisRank int
	ThisErr  error
	// Unreached says some rank did not come back from its fn in time to
	// agree on the outcome; Rank and Err are then what this rank knows. MPI
	// cannot be finalised cleanly: end the job with Abort.
	Unreached bool
}

func (e *RunError) Error() string {
	msg := fmt.Sprintf("mpi: rank %d failed: %v", e.Rank, e.Err)
	if e.ThisErr != nil && e.ThisRank != e.Rank {
		var pe *comm.PeerError
		switch {
		case errors.As(e.ThisErr, &pe):
			msg += fmt.Sprintf("\n(rank %d stopped because of it)", e.ThisRank)
		case e.ThisErr.Error() == e.Err.Error():
			// Invalid arguments, say: every rank refuses them alike.
			msg += fmt.Sprintf(" (rank %d too)", e.ThisRank)
		default:
			msg += fmt.Sprintf("\n(rank %d also failed: %v)", e.ThisRank, e.ThisErr)
		}
	}
	if e.Unreached {
		msg += "\n(not every rank came back to agree on the outcome in time)"
	}
	return msg
}

// Unwrap returns the root cause, Err.
func (e *RunError) Unwrap() error { return e.Err }
