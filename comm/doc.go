// Package comm defines gotron's communication layer: the Group interface
// (collectives and point-to-point messages of one rank within a group of
// ranks, each call taking a context), Work handles for async operations,
// typed Buffers, reductions, and the errors every backend reports.
//
// It is the Go form of the part of torch.distributed that Megatron-Core
// uses: all_reduce, reduce_scatter_tensor, all_gather_into_tensor,
// broadcast, all_to_all_single, isend/irecv and batch_isend_irecv, barrier,
// and new_group. Backends implement Group:
//
//   - comm/local runs the ranks of a world as goroutines of one process over
//     shared memory (the embedded default);
//   - comm/mpi runs one rank per process through Open MPI (build tag mpi);
//   - comm/commtest is the conformance suite both pass.
//
// Training code sees only Group, so it never knows which backend runs.
//
// # Reproducibility
//
// Reductions are computed in a fixed order (group rank 0, 1, …, n-1, left
// to right; see ReduceOp and Reduce), so a result is bitwise the same on
// every run and every backend, whatever the timing.
//
// # Hangs and failures
//
// Every blocking call takes a context.Context and is bounded by
// Options.Timeout. Each group numbers its collectives, and each ordered pair
// of ranks its messages; a wait that ends early returns a *TimeoutError
// naming the rank, group, operation, sequence number and what every other
// member was doing, and a failed rank makes every other rank's calls return
// a *PeerError naming it and its cause (see Group).
package comm
