package rng

import (
	"fmt"
	"math/bits"
)

// State is the complete state of an [RNG]: the four 64-bit words of xoshiro256**.
// It is a plain value; copying it copies the generator's position in its stream.
// The all-zero state is invalid (xoshiro256** would output zeros forever).
type State [4]uint64

// RNG is a xoshiro256** generator. The zero value is invalid; make one with [New] or
// [RNG.SetState]. An RNG must not be used by several goroutines at once.
type RNG struct {
	s State
}

// New returns a generator seeded with seed: its state words are the first four outputs of
// SplitMix64 seeded with seed, as the xoshiro authors recommend, so nearby seeds give
// unrelated streams.
func New(seed uint64) *RNG {
	var r RNG
	r.Seed(seed)
	return &r
}

// Seed resets r to the state [New](seed) starts from.
func (r *RNG) Seed(seed uint64) {
	for i := range r.s {
		r.s[i] = SplitMix64(seed + uint64(i)*golden)
	}
	if r.s == (State{}) { // unreachable for SplitMix64 outputs, kept as a guard
		r.s[0] = golden
	}
}

// State returns a copy of r's state. Restoring it with [RNG.SetState] replays the same
// stream from this point.
func (r *RNG) State() State { return r.s }

// SetState sets r's state to s. It panics if s is all zeros, which no generator can reach
// and which would make the stream constant (a programmer bug).
func (r *RNG) SetState(s State) {
	if s == (State{}) {
		panic(fmt.Sprintf("rng: SetState(%v): the all-zero state is invalid for xoshiro256**; take states from State()", s))
	}
	r.s = s
}

// Uint64 returns the next 64-bit output of xoshiro256**:
// result = rotl(s1·5, 7)·9, then the linear state update.
func (r *RNG) Uint64() uint64 {
	s0, s1, s2, s3 := r.s[0], r.s[1], r.s[2], r.s[3]
	result := bits.RotateLeft64(s1*5, 7) * 9
	t := s1 << 17
	s2 ^= s0
	s3 ^= s1
	s1 ^= s2
	s0 ^= s3
	s2 ^= t
	r.s = State{s0, s1, s2, bits.RotateLeft64(s3, 45)}
	return result
}

// Float64 returns a uniform float64 in [0, 1): the top 53 bits of one Uint64 times 2^-53.
func (r *RNG) Float64() float64 {
	return float64(r.Uint64()>>11) * (1.0 / (1 << 53))
}

// Float32 returns a uniform float32 in [0, 1): the top 24 bits of one Uint64 times 2^-24.
func (r *RNG) Float32() float32 {
	return float32(r.Uint64()>>40) * (1.0 / (1 << 24))
}

// Uint64n returns a uniform integer in [0, n) using Lemire's nearly-divisionless method
// (one Uint64 per draw except with probability below n/2^64). It panics if n == 0.
func (r *RNG) Uint64n(n uint64) uint64 {
	if n == 0 {
		panic("rng: Uint64n(0): the range [0, 0) is empty")
	}
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}
