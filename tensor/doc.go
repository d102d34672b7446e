// Package tensor holds gotron's N-dimensional float32 tensors.
//
// A Tensor is a strided view of a float32 storage slice: reshape (of a
// contiguous tensor), transpose, permute, narrow and split return views that
// share the storage, so no copy is made where a view works. Contiguous (and
// Reshape of a non-contiguous tensor, as torch.reshape does) are the only
// operations that copy, and they say so. Kernels run on contiguous data
// (Data), reached through Contiguous.
//
// New returns zeros; Empty returns storage Go has not zeroed, as
// torch.empty, for results a kernel overwrites whole (a training step's
// activations and gradients: zeroing them was a tenth of a bf16 step).
// Under the build tag gotron_poison, Empty fills with NaNs instead, so a
// test sees any element left unwritten.
//
// float32 is gotron's compute type. bfloat16 and float16 are storage and
// communication types (Half), converted with round-to-nearest-even.
//
// Matrix products (Gemm, GemmParallel) of 2 MFLOP and more, and every
// bfloat16 one, run on oneDNN's matmul (package dnnl) over the caller's
// threads; smaller float32 ones on package blas (single-threaded OpenBLAS
// via cgo). With CGO_ENABLED=0 every product runs on gonum's pure-Go BLAS.
// MeasureGemm times one kernel at a shape alone (gotron bench --gemm);
// TimeGemms records the wall time of every product the process computes
// while it runs, per shape (gotron bench --breakdown), so a shape's rate
// inside a training step can be set beside its rate alone.
package tensor
