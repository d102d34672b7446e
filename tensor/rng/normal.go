package rng

import "math"

// NormFloat64 returns a standard normal deviate by the Box–Muller transform (Box and Muller,
// Ann. Math. Statist. 29, 1958): with u1 = 1 − Float64() in (0, 1] and u2 = Float64(),
// z = sqrt(−2·ln u1)·cos(2π·u2). It consumes exactly two Uint64 values and discards the
// sine partner, so the stream position depends only on the number of calls.
func (r *RNG) NormFloat64() float64 {
	u1 := 1 - r.Float64()
	u2 := r.Float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// FillNormal fills dst with float32(mean + std·z) for standard normal deviates z, using both
// outputs of each Box–Muller pair: for k = 0, 1, ..., with u1 = 1 − Float64() and
// u2 = Float64() drawn in that order,
//
//	dst[2k]   = mean + std·(sqrt(−2·ln u1)·cos(2π·u2))
//	dst[2k+1] = mean + std·(sqrt(−2·ln u1)·sin(2π·u2))
//
// (the sine of the last pair is dropped when len(dst) is odd). It consumes 2·⌈len(dst)/2⌉
// Uint64 values, so dst[0] equals what NormFloat64 would have returned, but longer fills
// are not the same stream as repeated NormFloat64 calls.
func (r *RNG) FillNormal(dst []float32, mean, std float64) {
	i := 0
	for ; i+2 <= len(dst); i += 2 {
		u1 := 1 - r.Float64()
		u2 := r.Float64()
		rad := math.Sqrt(-2 * math.Log(u1))
		s, c := math.Sincos(2 * math.Pi * u2)
		d := dst[i : i+2 : i+2]
		// The explicit conversions forbid fused multiply-adds, so every platform rounds alike.
		d[0] = float32(mean + float64(std*float64(rad*c)))
		d[1] = float32(mean + float64(std*float64(rad*s)))
	}
	if i < len(dst) {
		dst[i] = float32(mean + float64(std*r.NormFloat64()))
	}
}

// SkipNormal advances r exactly as FillNormal of n values would, without
// computing them: 2·⌈n/2⌉ Uint64 values. A model chunk uses it to pass over
// the weights of layers it does not hold, so that the weights it holds get
// the numbers the whole model would give them.
func (r *RNG) SkipNormal(n int) {
	for k := 2 * ((n + 1) / 2); k > 0; k-- {
		r.Uint64()
	}
}
