// Package nprand reproduces the draws of numpy's legacy generator,
// numpy.random.RandomState, that Megatron's GPTDataset uses to shuffle its
// indices: the MT19937 Mersenne Twister seeded from one integer, its 32- and
// 64-bit outputs, bounded integers by bitmask rejection, and shuffle.
//
// Seeding (numpy's mt19937_seed, the reference generator's init_genrand): the
// state words are
//
//	key[0] = seed
//	key[i] = 1812433253·(key[i−1] ⊕ (key[i−1] >> 30)) + i   (mod 2^32), i = 1..623
//
// and the first draw regenerates the whole block of 624 words. A draw tempers
// the next word y:
//
//	y ⊕= y >> 11; y ⊕= (y << 7) & 0x9d2c5680; y ⊕= (y << 15) & 0xefc60000; y ⊕= y >> 18
//
// A 64-bit draw is two 32-bit draws, the first one the high half.
package nprand

const (
	stateLen  = 624
	shift     = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// RandomState is numpy.random.RandomState(seed) for an integer seed: the same
// seed gives the same sequence of draws. It is not safe for concurrent use.
type RandomState struct {
	key [stateLen]uint32
	pos int
}

// New returns the generator numpy.random.RandomState(seed) holds. numpy takes
// integer seeds in [0, 2^32−1], which is what uint32 holds.
func New(seed uint32) *RandomState {
	r := &RandomState{pos: stateLen}
	s := seed
	for i := range r.key {
		r.key[i] = s
		s = 1812433253*(s^(s>>30)) + uint32(i) + 1
	}
	return r
}

// regenerate computes the next block of 624 state words (numpy's mt19937_gen).
func (r *RandomState) regenerate() {
	k := &r.key
	mix := func(i, j, into int) {
		y := k[i]&upperMask | k[j]&lowerMask
		k[i] = k[into] ^ y>>1 ^ (-(y & 1) & matrixA)
	}
	for i := 0; i < stateLen-1; i++ {
		mix(i, i+1, (i+shift)%stateLen)
	}
	mix(stateLen-1, 0, shift-1)
	r.pos = 0
}

// Uint32 returns the next 32-bit draw (numpy's next_uint32; the raw output of
// RandomState's bit generator).
func (r *RandomState) Uint32() uint32 {
	if r.pos == stateLen {
		r.regenerate()
	}
	y := r.key[r.pos]
	r.pos++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// Uint64 returns the next 64-bit draw: two 32-bit draws, the first one the
// high half (numpy's legacy next_uint64 of MT19937).
func (r *RandomState) Uint64() uint64 {
	hi := uint64(r.Uint32())
	return hi<<32 | uint64(r.Uint32())
}

// Interval returns a uniform integer in [0, max] as numpy's random_interval
// does: with mask the smallest 2^k − 1 ≥ max, it draws v = draw & mask until
// v ≤ max, from 32-bit draws when max ≤ 2^32 − 1 and from 64-bit draws
// otherwise. Interval(0) is 0 and draws nothing. (It is also what legacy
// RandomState.randint(0, max+1, dtype=uint64) returns for one integer.)
func (r *RandomState) Interval(max uint64) uint64 {
	if max == 0 {
		return 0
	}
	mask := max
	mask |= mask >> 1
	mask |= mask >> 2
	mask |= mask >> 4
	mask |= mask >> 8
	mask |= mask >> 16
	mask |= mask >> 32
	if max <= 0xffffffff {
		for {
			if v := uint64(r.Uint32()) & mask; v <= max {
				return v
			}
		}
	}
	for {
		if v := r.Uint64() & mask; v <= max {
			return v
		}
	}
}

// Shuffle permutes s in place as RandomState.shuffle does for a 1-d array
// (any dtype: only positions move): Fisher–Yates from the end, for i = n−1
// down to 1 swapping s[i] with s[Interval(i)]. An array of 0 or 1 elements
// draws nothing.
func Shuffle[E any](r *RandomState, s []E) {
	for i := len(s) - 1; i > 0; i-- {
		j := r.Interval(uint64(i))
		s[i], s[j] = s[j], s[i]
	}
}
