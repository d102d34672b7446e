//go:build goexperiment.simd && amd64 && !amd64.v3

package kernels

// scalarMayFuse: below GOAMD64=v3 the compiler emits no fused multiply-adds.
const scalarMayFuse = false
