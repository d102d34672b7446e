//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// fma8 is fmaf on eight lanes: a·b + c with the operands widened to float64 (exact), one
// float64 fused multiply-add (VFMADD213PD) and one rounding to float32, as math.FMA.
func fma8(a, b, c archsimd.Float32x8) archsimd.Float32x8 {
	al, ah := widen8(a)
	bl, bh := widen8(b)
	cl, ch := widen8(c)
	return narrow8(al.MulAdd(bl, cl), ah.MulAdd(bh, ch))
}

// adamSIMD is adamGo on eight lanes (the loop is bound by memory bandwidth). The last
// len(param) mod 8 elements go through adamGo, which gives the same bits (AdamStep's scalar
// loop rounds explicitly, so the compiler cannot fuse it on any GOAMD64 level).
func adamSIMD(param, grad, expAvg, expAvgSq []float32, k *adamScalars) bool {
	if !hasAVX2() {
		return false
	}
	grad, expAvg, expAvgSq = grad[:len(param)], expAvg[:len(param)], expAvgSq[:len(param)]
	beta1, omb1, beta2, omb2 := b8(k.beta1), b8(k.omb1), b8(k.beta2), b8(k.omb2)
	bc2sqrt, negStep, eps, wd, decay := b8(k.bc2sqrt), b8(k.negStep), b8(k.eps), b8(k.wd), b8(k.decay)
	l2, decouple := k.l2, k.decouple
	n := len(param) &^ 7
	for i := 0; i < n; i += 8 {
		p, g := ld8(param, i), ld8(grad, i)
		if l2 {
			g = fma8(wd, p, g)
		}
		if decouple {
			p = p.Mul(decay)
		}
		m := fma8(omb1, g, ld8(expAvg, i).Mul(beta1))
		v := fma8(omb2.Mul(g), g, ld8(expAvgSq, i).Mul(beta2))
		denom := v.Sqrt().Div(bc2sqrt).Add(eps)
		st8(m, expAvg, i)
		st8(v, expAvgSq, i)
		st8(p.Add(negStep.Mul(m).Div(denom)), param, i)
	}
	archsimd.ClearAVXUpperBits()
	adamGo(param[n:], grad[n:], expAvg[n:], expAvgSq[n:], k)
	return true
}
