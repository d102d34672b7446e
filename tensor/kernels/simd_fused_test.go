//go:build goexperiment.simd && amd64 && amd64.v3

package kernels

// scalarMayFuse: with GOAMD64=v3 the compiler may fuse the scalar loops' multiply-adds.
const scalarMayFuse = true
