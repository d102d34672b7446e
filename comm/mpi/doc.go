// Package mpi runs the ranks of a gotron world as processes launched by
// mpirun (or Slurm's srun), one rank per process, through gotron's own thin
// cgo binding to Open MPI. It implements comm.Group and passes the same
// conformance suite (comm/commtest) as comm/local, with the same results
// bit for bit and the same errors, so training code never knows which
// backend runs.
//
// The package builds only with the build tag mpi (go build -tags mpi), so a
// plain go build needs no MPI; it links libmpi through pkg-config's ompi-c
// (Debian: libopenmpi-dev). Without the tag it is this documentation only.
//
//	func main() {
//		err := mpi.Run(ctx, comm.Options{Timeout: 10 * time.Minute},
//			func(ctx context.Context, g comm.Group) error {
//				x := []float32{float32(g.Rank())}
//				return g.AllReduce(ctx, comm.F32(x), comm.Sum) // Σ ranks
//			})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//	}
//
// launched as
//
//	mpirun -np 4 --mca btl self,vader ./prog
//
// Run is Init, NewWorld, World.Run, World.Close and Finalize in one call; a
// World has the shape of comm/local's (World.Run(ctx, fn)), so code written
// against one runs on the other.
//
// # How it maps onto MPI
//
// MPI is initialised with MPI_THREAD_MULTIPLE: goroutines call MPI
// concurrently. Every operation is nonblocking MPI (MPI_Iallgather(v),
// MPI_Ialltoall(v), MPI_Ibcast, MPI_Isend, MPI_Irecv) polled with MPI_Test,
// so that each call honours its context and comm.Options.Timeout; the poll
// spins for a few tens of microseconds (when the node has a core per rank),
// then yields, then sleeps for a growing fraction of the time waited, up
// to 1ms, so a short wait ends at once and a long one does not spin a core
// (poll.go). An async message's Work is polled by the goroutine that
// calls Wait, when it comes soon after the issue, which saves two thread
// wake-ups per Work; otherwise the controller starts a goroutine for it
// (work.go). Each group is five duplicate communicators, so that traffic
// of different kinds never depends on the order in which goroutines reach
// MPI (group.go).
//
// Each collective first swaps a small header with every member, so that
// members whose arguments disagree all get the same *comm.MismatchError
// instead of memory corruption or a hang (header.go). Reductions let MPI
// move the data and add it with comm.Reduce, members in rank order: the
// results are bitwise those of comm/local for any process count, and
// bfloat16 and float16, which MPI cannot reduce, are reduced in float32
// and rounded once (collectives.go). Subgroups are MPI_Comm_split
// communicators. Messages are tagged with their sequence number and dtype,
// and each receive sends its sender a note of its dtype and length when it
// is issued, so both sides see a mismatch without a reply on the message's
// path (p2p.go).
//
// # Failures and hangs
//
// Each World has a control communicator that a goroutine of every process
// watches (control.go). A rank whose fn fails, panics or gives up waiting
// announces it there, and the other ranks' pending and later calls return
// a *comm.PeerError naming it and carrying its error, rebuilt field by
// field so that errors.Is and errors.As work across processes
// (errwire.go). A call that gives up asks each member, over the same
// channel, what it last issued on the group and what it is blocked in, so
// the *comm.TimeoutError reports every member's state, as comm/local's
// does. World.Run ends with a small agreement so that every rank returns
// the same root cause (agree.go); MPI_Abort is used only when some rank
// never comes back (Run, Abort).
//
// The benchmarks (bench_test.go, run by run_tests.sh -bench) compare
// AllReduce with MPI_Iallreduce itself and with a memory copy of the same
// size.
package mpi
