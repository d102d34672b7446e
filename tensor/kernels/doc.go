// Package kernels holds gotron's fused CPU kernels: plain functions over contiguous float32
// slices, called by the tensor and autograd layers for everything in the GPT that is not a
// GEMM (GEMMs go through a BLAS).
//
// # Families
//
//   - LayerNorm forward and backward ([LayerNormForward], [LayerNormBackward]).
//   - GELU (tanh approximation), alone and fused with the preceding bias add
//     ([GeluForward], [BiasGeluForward] and their backwards).
//   - Cross entropy from logits with a saved log-sum-exp ([CrossEntropyForward],
//     [CrossEntropyBackward]), and its pieces for a vocab-parallel split ([LogSumExpRows],
//     [SoftmaxWithLSE]).
//   - Causal attention softmax of one head's score matrix, with a saved log-sum-exp for
//     recompute ([CausalSoftmaxForward], [CausalSoftmaxRecompute], [SoftmaxBackwardRows]).
//   - Embedding gather and deterministic scatter-add ([EmbeddingForward], [EmbeddingBackward]).
//   - Inverted dropout driven by a [rng.RNG] ([Dropout], [DropoutBackward]), or counter-based,
//     each element's mask a pure function of a key and its counter ([DropoutAt]).
//   - Adam/AdamW exactly as torch.optim ([AdamStep]) and the clipping factor ([ClipScale]).
//   - Elementwise and reductions ([AddInto], [Add], [Scale], [Axpy], [SumSquares],
//     [ColumnSumInto]).
//   - bf16 and fp16 conversions ([F32ToBF16], [BF16ToF32], [F32ToF16], [F16ToF32]), and the
//     accumulation of a float32 contribution into a 16-bit gradient with one rounding
//     ([AddRoundBF16], [AddRoundF16]).
//
// # Contracts
//
// Shapes are row-major; each kernel's doc comment gives them as [rows, cols]. Lengths are
// checked once per call and a mismatch panics with a message naming the kernel, the argument
// and the expected arithmetic: wrong lengths are programmer bugs. Nothing allocates on the
// heap.
//
// Outputs named d… for parameters (dw, db, dbias, dtable) and ColumnSumInto's dst are
// ACCUMULATED (+=), so that gradients add up across microbatches; every other output is
// overwritten. Aliasing is allowed only where a doc comment says so, and then only exactly
// (the same start and length), never as a partial overlap.
//
// # Precision
//
// Compute is float32. Reductions whose error would otherwise grow with the row length are
// accumulated in float64 and rounded once: LayerNorm's row statistics, the log-sum-exp of
// cross entropy and softmax, softmax backward's row sums, SumSquares and ColumnSumInto.
// Per-parameter accumulations across rows (LayerNorm's dw and db, BiasGelu's dbias,
// Embedding's dtable) are float32 in row order, deterministic for a given split. Exponentials
// use a float32 polynomial (Cephes' expf) accurate to about 1 ulp. Each kernel's comment states
// its choice; the tests compare every kernel with a float64 reference loop, every backward
// reference with central finite differences, and the kernels with PyTorch's outputs
// (testdata/torch_reference.json; AdamStep, Dropout's scale and the half conversions bit for
// bit).
//
// # Vector paths
//
// Built with GOEXPERIMENT=simd on amd64 (Go 1.26's simd/archsimd), the kernels run their hot
// loops on 16-lane AVX-512 or 8-lane AVX2 vectors, chosen per call from the CPU features the
// runtime detected at start-up; other builds and CPUs run the scalar loops, which stay the
// portable definition (simd_amd64.go has the details). The vector code repeats the scalar
// arithmetic operation by operation (no fused multiply-adds in float32, the same Cephes
// exponential), so elementwise results — GELU and BiasGELU, the elementwise kernels,
// ColumnSumInto, LayerNorm's y and dx given its row statistics, the softmax and cross-entropy
// probabilities given their normalizers, AdamStep — are bit for bit those of the scalar
// build (at the default GOAMD64 level; from v3 on the compiler may fuse the scalar loops). The float64 reductions accumulate in eight lanes instead of two or four, so a
// log-sum-exp, a row statistic or SumSquares may differ from the scalar build's in its last
// float64 bits, and a float32 result rounded from it by one ulp; every accuracy bound above
// holds in both builds.
//
// No legacy-SSE instruction that writes an XMM register may run while the vector registers'
// upper halves are dirty (the compiler emits them for a broadcast zero, a shift count, a struct
// copy, a horizontal sum, the scalar tail of a loop, and runtime.memmove emits them for short
// copies): on an Intel Xeon each one stalls, and one MOVQ made F32ToBF16 run at 0.7 GB/s
// instead of 26 (2026-11-28). TestNoLegacySSEWhileDirty reads the kernels' machine code for
// them, across the calls between the kernels' functions (package internal/asmcheck); scalar
// code after vector code clears the upper halves first (archsimd.ClearAVXUpperBits, and the
// scalar fallbacks a vector loop calls clear them on entry), constants are read through a
// pointer, and partial vectors move through integer loads and stores.
//
// # Parallelism
//
// Each kernel is single-threaded over the slices it is given. Callers split rows across
// goroutines with [ParallelFor]; for accumulated outputs they give each worker its own
// partial buffer ([ParallelForWorker]) and sum the partials in worker order, so results stay
// deterministic for a given worker count.
package kernels
