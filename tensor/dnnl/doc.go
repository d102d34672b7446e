// Package dnnl is gotron's large GEMM on oneDNN: C = alpha·op(A)·op(B) +
// beta·C with A and B in bfloat16 ([GemmBF16]) or float32 ([GemmF32]), C in
// float32 and float32 accumulation, on row-major matrices laid out as for
// [blas.Sgemm].
//
// A bfloat16 value is a uint16 holding the top 16 bits of a float32, as
// [kernels.F32ToBF16] produces and [kernels.BF16ToF32] widens exactly.
//
// # Backends
//
// With cgo (the default build) GemmBF16 runs oneDNN's matmul primitive
// (Debian's libdnnl-dev, scripts/deps.sh dnnl): src and weights bf16, dst
// f32, alpha as an output scale and beta as a sum post-op. Transposes and
// leading dimensions are memory-descriptor strides, so nothing is copied.
// Dense operands (ld equal to the stored width) get oneDNN's brgemm kernels;
// a padded leading dimension makes oneDNN pick its gemm-based kernel, which
// ran about as fast in a 1024×512×1536 test on one thread.
//
// [Available] reports whether that path exists, that is whether the CPU
// has AVX-512 BF16 (oneDNN's effective ISA, which ONEDNN_MAX_CPU_ISA can
// lower). When it does not, and in the build without cgo or with the tag
// gotron_purego, GemmBF16 widens A and B to float32 and runs the float32
// GEMM: the same products (a bf16 product is exact in float32), summed in
// another order.
//
// # Native or widened: the plan
//
// A native bfloat16 kernel is not always the faster one. With AMX
// (avx512_core_amx) oneDNN's bf16 matmul ran 4–5× its float32 rate on this
// project's Intel Xeon; with AVX-512 BF16 alone (ONEDNN_MAX_CPU_ISA=
// AVX512_CORE_BF16 on the same machine, which is what a Cooper Lake runs)
// it ran at 0.6× float32's rate for large GEMMs and 0.9× for small ones:
// its dot-product instruction does no more work per cycle than two
// float32 FMA ports. [Plan] measures both paths once per machine,
// for GEMMs below [LargeFLOPs] (one thread, OpenBLAS when widened) and from
// it (oneDNN's float32 matmul when widened), keeps the rates in
// GOTRON_CACHE_DIR (default ~/.cache/gotron; "off" keeps nothing) when two
// probes agree, and GemmBF16 follows it; GOTRON_BF16_GEMM=native, float32
// or auto overrides it. The trainer decides the plan before its
// ranks start and names it on its start-up line.
//
// GemmF32 is the same primitive on float32 A and B; oneDNN has float32
// kernels for every x86-64 CPU, so it runs whenever oneDNN is linked ([F32]).
// Split over two threads it reached 197–219 GFLOP/s on the medium benchmark
// model's GEMM shapes on this project's 2-core AVX-512 machine, against
// 164–203 for two goroutines each calling a single-threaded OpenBLAS on half
// of C, which packs all of the shared operand twice (tensor's
// BenchmarkGemmThreads, -count 3, 2026-11-24).
//
// # Primitive cache and concurrency
//
// Creating a oneDNN primitive costs far more than a small GEMM, so the cgo
// build keeps one per (m, n, k, transA, transB, lda, ldb, ldc, alpha, beta,
// threads) for the life of the process; gotron's shapes are few and fixed by
// the model. GemmBF16 may be called from many goroutines at once: executing a
// primitive is thread-safe, the primitives use a caller-provided scratchpad
// (oneDNN's default shared scratchpad would tie each primitive to the OS
// thread that created it), and each OS thread gets its own oneDNN stream and
// scratchpad buffer, freed when the thread exits.
//
// # Threads
//
// Debian's oneDNN runs on OpenMP. Each call says how many threads it runs
// on; the count is a per-OS-thread OpenMP setting, so every call sets it on
// the OS thread it runs on, and primitives are cached per count. With more
// than 1, each OS thread that calls starts its own OpenMP team, whose idle
// threads spin briefly after each call (OMP_WAIT_POLICY=passive stops that).
package dnnl
