// Package train is gotron's pretraining loop (Megatron's pretrain): it
// builds the ranks and their groups, the model, data, optimizer and
// schedule, runs the iterations with gradient accumulation, reduces
// gradients across data-parallel ranks, clips, steps, evaluates, logs
// Megatron-style iteration lines, and saves and resumes checkpoints.
//
// Ranks run as goroutines of this process (comm/local) unless a world group
// is given (one process per rank under mpirun). Every rank computes the
// same global batch per step whatever the layout, so the loss curve does not
// depend on how many ranks train it.
package train
