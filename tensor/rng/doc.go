// Package rng is gotron's pseudo-random number generator: xoshiro256** (Blackman and Vigna,
// "Scrambled linear pseudorandom number generators", ACM TOMS 2021) seeded through
// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014).
//
// The whole state of a generator is a [State], a plain array that can be copied, saved in a
// checkpoint and restored: after r.SetState(s) the generator replays exactly the stream it
// produced after s was taken. This is what the RNG tracker (named streams such as
// "model-parallel-rng"), dropout and activation recompute build on.
//
// Counter-based draws need no state: [SplitMix64] at k + n·[Golden] is word n of the stream
// with key k, and [Derive] names sub-streams (a layer's, a sample's), so a draw is a pure
// function of where it is made; counter-based dropout (kernels.DropoutAt) is built on it.
//
// An [RNG] is not safe for concurrent use; give each goroutine its own. The package has no
// global generator and no package-level mutable state.
//
// Streams are fixed by this package's documentation, not by an implementation detail:
// Uint64 is xoshiro256** output, Float32 and Float64 use its top 24 and 53 bits (integer
// arithmetic: the same bits on every platform), and NormFloat64 and FillNormal use the
// Box–Muller transform as documented on each (Go's math.Log and math.Sincos: the same bits
// for a given architecture).
package rng
