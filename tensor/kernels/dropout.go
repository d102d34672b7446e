package kernels

import (
	"fmt"

	"github.com/gotron/gotron/tensor/rng"
)

// Dropout applies inverted dropout (Srivastava et al. 2014; torch.nn.functional.dropout in
// training): each element is kept with probability 1 − p and scaled by 1/(1 − p), else set
// to zero:
//
//	y[i] = x[i] · mask[i] · scale,  scale = 1 / float32(1 − p)
//
// with 1 − p formed in float64 from the decimal value of p (0.1f is taken as 0.1) and the
// division in float32, as torch's CPU dropout forms its noise tensor (checked against torch
// in the tests). mask[i] is 1 for a kept element and 0 for a dropped one; the product keeps
// torch's semantics for special values (a dropped NaN stays NaN, a dropped −x gives −0).
//
// Random stream: one g.Uint64() per pair of elements; its low 32 bits decide element 2k and
// its high 32 bits element 2k+1 (an odd tail uses the low half of one more draw). Element i is
// kept iff its 32-bit value u satisfies u ≥ round(p·2^32), so the keep probability is 1 − p to
// within 2^-33. Restoring g's state before a call replays the same mask (activation recompute).
//
// p = 0 is the identity: y = x, mask (if non-nil) all 1, and no random numbers are drawn.
// p = 1 drops everything: y = x·0 (so NaN stays NaN), mask all 0, and no random numbers are
// drawn. y may alias x exactly. Panics if p is outside [0, 1] or a length differs (programmer
// bugs).
func Dropout(y []float32, mask []byte, x []float32, p float32, g *rng.RNG) {
	thresh, scale, done := dropoutStart("Dropout", y, mask, x, p)
	if done {
		return
	}
	y, mask = y[:len(x)], mask[:len(x)]
	i := 0
	for ; i+2 <= len(x); i += 2 {
		u := g.Uint64()
		k0 := 1 - (u&0xFFFFFFFF-thresh)>>63 // 1 iff low half ≥ thresh
		k1 := 1 - (u>>32-thresh)>>63        // 1 iff high half ≥ thresh
		xv, yv, mv := x[i:i+2:i+2], y[i:i+2:i+2], mask[i:i+2:i+2]
		mv[0], mv[1] = byte(k0), byte(k1)
		yv[0] = xv[0] * float32(k0) * scale
		yv[1] = xv[1] * float32(k1) * scale
	}
	if i < len(x) {
		u := g.Uint64()
		k := 1 - (u&0xFFFFFFFF-thresh)>>63
		mask[i] = byte(k)
		y[i] = x[i] * float32(k) * scale
	}
}

// DropoutBackward is the gradient of [Dropout]: dx[i] = dy[i] · mask[i] · scale with
// [Dropout]'s scale, overwriting dx; for p = 0 it copies dy (mask may be nil) and for p = 1 it writes dy·0.
// dx may alias dy exactly. Panics if p is outside [0, 1] or a length differs (programmer
// bugs).
func DropoutBackward(dx, dy []float32, mask []byte, p float32) {
	const op = "DropoutBackward"
	checkP(op, p)
	needLen(op, "dx", len(dx), len(dy), "len(dy)")
	dx = dx[:len(dy)]
	switch p {
	case 0:
		copy(dx, dy)
		return
	case 1:
		for i, v := range dy {
			dx[i] = v * 0
		}
		return
	}
	needLen(op, "mask", len(mask), len(dy), "len(dy)")
	mask = mask[:len(dy)]
	scale := dropoutScale(widen(p))
	for i, v := range dy {
		dx[i] = v * float32(mask[i]) * scale
	}
}

// dropoutStart checks a dropout's arguments (panicking as [Dropout] documents) and does the
// whole job for p = 0 and p = 1 (done); otherwise it returns the 32-bit threshold below which
// an element is dropped, round(p·2^32), and the kept elements' scale.
func dropoutStart(op string, y []float32, mask []byte, x []float32, p float32) (thresh uint64, scale float32, done bool) {
	checkP(op, p)
	needLen(op, "y", len(y), len(x), "len(x)")
	if mask != nil || p != 0 {
		needLen(op, "mask", len(mask), len(x), "len(x)")
	}
	y = y[:len(x)]
	switch p {
	case 0:
		copy(y, x)
		for i := range mask {
			mask[i] = 1
		}
		return 0, 0, true
	case 1:
		for i, v := range x {
			y[i] = v * 0
		}
		clear(mask)
		return 0, 0, true
	}
	pw := widen(p)
	return uint64(pw*(1<<32) + 0.5), dropoutScale(pw), false
}

// dropoutScale returns 1/(1 − p) as torch computes it: 1 − p in float64, rounded to
// float32, then a float32 division.
func dropoutScale(p float64) float32 {
	return 1 / float32(1-p)
}

// checkP panics unless 0 ≤ p ≤ 1.
func checkP(op string, p float32) {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("kernels.%s: dropout probability p = %v, want 0 ≤ p ≤ 1", op, p))
	}
}

// DropoutAt is [Dropout] with a counter-based mask: element i of x is element c0+i of the
// stream key, kept iff the 32-bit half (c0+i)&1 (0: low, 1: high) of the word
// rng.SplitMix64(key + ((c0+i)>>1)·rng.Golden) is at least round(p·2^32). The mask is a
// pure function of (key, counter, p), so any split of a row into pieces, in any order, on
// any rank, draws the same bits as the whole row: a caller keys each element by its place
// in the unsharded tensor and the mask does not depend on the layout. No state is drawn
// or kept. p = 0 and p = 1 and the aliasing and panics are as [Dropout]'s.
func DropoutAt(y []float32, mask []byte, x []float32, p float32, key, c0 uint64) {
	thresh, scale, done := dropoutStart("DropoutAt", y, mask, x, p)
	if done {
		return
	}
	y, mask = y[:len(x)], mask[:len(x)]
	keep := func(i int, half uint64) {
		k := 1 - (half-thresh)>>63 // 1 iff half ≥ thresh
		mask[i], y[i] = byte(k), x[i]*float32(k)*scale
	}
	i := 0
	if c0&1 == 1 && len(x) > 0 { // the high half of the first word
		keep(0, rng.SplitMix64(key+(c0>>1)*rng.Golden)>>32)
		i = 1
	}
	w := key + ((c0+uint64(i))>>1)*rng.Golden // the word of elements i and i+1
	for ; i+2 <= len(x); i += 2 {
		u := rng.SplitMix64(w)
		w += rng.Golden
		k0 := 1 - (u&0xFFFFFFFF-thresh)>>63
		k1 := 1 - (u>>32-thresh)>>63
		xv, yv, mv := x[i:i+2:i+2], y[i:i+2:i+2], mask[i:i+2:i+2]
		mv[0], mv[1] = byte(k0), byte(k1)
		yv[0] = xv[0] * float32(k0) * scale
		yv[1] = xv[1] * float32(k1) * scale
	}
	if i < len(x) { // the low half of the last word
		keep(i, rng.SplitMix64(w)&0xFFFFFFFF)
	}
}
