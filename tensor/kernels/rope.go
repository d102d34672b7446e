package kernels

import (
	"fmt"
	"math"
)

// RotaryTable holds the cosines and sines of rotary position embeddings (RoPE; Su et al.
// 2021, arXiv 2104.09864) for a list of positions, as Megatron's RotaryEmbedding computes
// them in float32: for the rot rotated channels of a head, pair k < rot/2 turns by
//
//	θ[p,k] = p · inv_freq[k],   inv_freq[k] = 1 / base^(2k/rot)
//
// at position p. Cos and Sin are [len(positions), rot/2], row i for positions[i].
type RotaryTable struct {
	Cos, Sin []float32
	// Rot is the number of rotated channels (even); the rest of a head passes through.
	Rot int
	// Interleaved pairs channels (2k, 2k+1); otherwise (k, k + rot/2).
	Interleaved bool
}

// NewRotaryTable returns the table of positions for rot channels and base. Every step is
// float32 as in the reference (2k/rot, base^(·), 1/·, p·inv_freq), with pow and cos/sin
// evaluated in float64 and rounded. rot must be even and positive.
func NewRotaryTable(positions []int, rot int, base float64, interleaved bool) (*RotaryTable, error) {
	if rot < 2 || rot%2 != 0 {
		return nil, fmt.Errorf("kernels: rotary embeddings of %d channels: the count must be even and at least 2", rot)
	}
	return NewRotaryTableOf(positions, RotaryInvFreq(rot, base), interleaved, 1), nil
}

// RotaryInvFreq returns RoPE's inverse frequencies base^(−2k/rot) for
// k < rot/2, every step float32 as in the reference, pow in float64.
func RotaryInvFreq(rot int, base float64) []float32 {
	inv := make([]float32, rot/2)
	for k := range inv {
		e := float32(2*k) / float32(rot)
		inv[k] = 1 / float32(math.Pow(base, float64(e)))
	}
	return inv
}

// NewRotaryTableOf returns the table of positions for the inverse
// frequencies inv (2·len(inv) rotated channels), its cosines and sines
// multiplied by factor (YaRN's concentration factor; 1 for RoPE): the
// angle p·inv[k] in float32, cos and sin in float64 rounded to float32,
// then scaled.
func NewRotaryTableOf(positions []int, inv []float32, interleaved bool, factor float32) *RotaryTable {
	half := len(inv)
	t := &RotaryTable{Cos: make([]float32, len(positions)*half), Sin: make([]float32, len(positions)*half), Rot: 2 * half, Interleaved: interleaved}
	for i, p := range positions {
		for k, f := range inv {
			a := float64(float32(p) * f)
			c, s := float32(math.Cos(a)), float32(math.Sin(a))
			if factor != 1 {
				c, s = c*factor, s*factor
			}
			t.Cos[i*half+k], t.Sin[i*half+k] = c, s
		}
	}
	return t
}

// Rotate applies the rotation of position row i to the first Rot channels of every head
// of x (heads consecutive vectors of d channels), in place:
//
//	(a, b) ← (a·cos θ − b·sin θ, b·cos θ + a·sin θ)
//
// for each channel pair (a, b). With inverse it turns by −θ (the transpose: the gradient
// of the forward rotation). Panics if len(x) is not a multiple of d or d < Rot.
func (t *RotaryTable) Rotate(x []float32, d, i int, inverse bool) {
	if d < t.Rot || len(x)%d != 0 {
		panic(fmt.Sprintf("kernels: RotaryTable.Rotate: %d values in heads of %d channels, %d rotated", len(x), d, t.Rot))
	}
	half := t.Rot / 2
	cos, sin := t.Cos[i*half:i*half+half], t.Sin[i*half:i*half+half]
	for h := 0; h+d <= len(x); h += d {
		v := x[h : h+t.Rot]
		for k, c := range cos {
			s := sin[k]
			if inverse {
				s = -s
			}
			ia, ib := k, k+half
			if t.Interleaved {
				ia, ib = 2*k, 2*k+1
			}
			a, b := v[ia], v[ib]
			v[ia] = a*c - b*s
			v[ib] = b*c + a*s
		}
	}
}
