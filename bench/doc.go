// Package bench measures gotron's training speed: `gotron bench`.
//
// Run (ranks as goroutines) and RunRank (one rank of an mpirun job) train
// each benchmark model (Config: small, medium, medium-llama, medium-moe,
// long) on mock data through train's driver seam (train.Prepare,
// Prepared.NewRank, Rank.Step), so the benchmark runs exactly the
// iterations `gotron train` runs, and print tokens/s, achieved GFLOP/s,
// peak memory, the step's and the optimizer's times, a pipeline's bubble
// and ring attention's blocked time. With Options.Breakdown the timed
// iterations are profiled and their CPU time split into phases
// (Breakdown), with the wall time and rate of each GEMM shape inside the
// step. Gemm measures every GEMM kernel of the machine at the models'
// shapes alone and prints the GEMM ceiling.
//
// Every configuration is prepared as a training run is (train.Prepare),
// before any runs: it is refused up front when it cannot fit in memory,
// and the process gets training's soft heap limit (its share of the
// machine's available memory, unless GOMEMLIMIT is set), so the
// benchmark measures the runtime settings training has.
//
// Speed is only ever measured here and by Go benchmarks, never by tests;
// docs/BENCHMARKS.md records the numbers, with the machine and the date.
package bench
