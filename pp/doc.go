// Package pp is gotron's pipeline parallelism, Megatron-Core's
// pipeline_parallel: the pure schedule functions (warmup counts, the
// interleaved schedule table and its order), each rank's schedule as a
// list of Actions, a verifier that plays every rank's list against the
// others, and the executors that walk a list with a model's forward and
// backward steps and a P2P communicator (package pp/p2p).
package pp
