// Package train is gotron's pretraining loop (Megatron's pretrain): it
// builds the ranks and their groups, the model, data, optimizer and
// schedule, runs the iterations with gradient accumulation, reduces
// gradients across data-parallel ranks, clips, steps, evaluates, logs
// Megatron-style iteration lines, and saves and resumes checkpoints.
//
// Ranks run as goroutines of this process (comm/local) unless a world group
// is given (one process per rank under mpirun). Every rank computes the
// same global batch per step whatever the layout, so the loss curve does not
// depend on how many ranks train it — dropout included, its masks keyed by
// the sample, the layer and the place in the whole tensor
// (gpt.Randomness.Counter).
//
// A run guards itself as Megatron's does: the loss and gradient checks
// (--check-for-nan-in-loss-and-grad, --check-for-spiky-loss), the rerun of
// a suspicious iteration (--rerun-mode, rerun.go), the ranks slower than
// the median (--log-straggler), and the restart of a failed job from its
// checkpoint (--inprocess-restart, Run); --inject-fault drills them
// (faults.go).
//
// Run and RunRank are whole runs. A program that drives the iterations
// itself (gotron bench, package bench) prepares the run as they do
// (Prepare: the checks that can refuse it, the kernels, the data), builds
// each rank (Prepared.NewRank) and calls Rank.Step.
package train
