//go:build !goexperiment.simd || !amd64

package kernels

// Without GOEXPERIMENT=simd on amd64 there are no vector paths: every hook reports false and
// the scalar loops do the work. The hooks inline to nothing, so this build compiles the
// scalar loops exactly as if the hooks were absent. See simd_amd64.go for the vector build.

func expAffineSIMD(dst, x []float32, a, c, m float32) (float64, bool)              { return 0, false }
func sumExpAffineSIMD(x []float32, a, c float32) (float64, bool)                   { return 0, false }
func maxScaledSIMD(x []float32, a float32) (float32, bool)                         { return 0, false }
func geluForwardSIMD(y, x []float32) bool                                          { return false }
func geluBackwardSIMD(dx, dy, x []float32) bool                                    { return false }
func biasGeluForwardSIMD(y, x, bias []float32, rows, cols int) bool                { return false }
func biasGeluBackwardSIMD(dx, dbias, dy, x, bias []float32, rows, cols int) bool   { return false }
func addSIMD(dst, a, b []float32) bool                                             { return false }
func addIntoSIMD(dst, a []float32) bool                                            { return false }
func scaleSIMD(x []float32, s float32) bool                                        { return false }
func axpySIMD(dst []float32, alpha float32, x []float32) bool                      { return false }
func sumSquaresSIMD(x []float32) (float64, bool)                                   { return 0, false }
func columnSumSIMD(d []float32, a []float64, x []float32, c0, rows, cols int) bool { return false }
func rowSumsSIMD(x []float32, k float64) (float64, float64, bool)                  { return 0, 0, false }
func layerNormRowSIMD(y, x, w, b []float32, m, rs float32) bool                    { return false }
func layerNormGradSIMD(dw, db, dy, x, w []float32, m, rs float32) (float64, float64, bool) {
	return 0, 0, false
}
func layerNormDxSIMD(dx, dy, x, w []float32, m, rs, mg, mgx float32) bool   { return false }
func adamSIMD(param, grad, expAvg, expAvgSq []float32, k *adamScalars) bool { return false }
func dotWideSIMD(a, b []float32) (float32, bool)                            { return 0, false }
func softmaxGradRowSIMD(ds, p, dp []float32, scale, d float32) bool         { return false }
func f32ToBF16SIMD(dst []uint16, src []float32) int                         { return 0 }
func bf16ToF32SIMD(dst []float32, src []uint16) int                         { return 0 }
func swigluRowSIMD(y, gate, up []float32) bool                              { return false }
func swigluGradRowSIMD(dg, dup, dy, gate, up []float32) bool                { return false }
