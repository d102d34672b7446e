package rng

// golden is 2^64/φ rounded to odd, SplitMix64's increment.
const golden = 0x9E3779B97F4A7C15

// SplitMix64 returns the SplitMix64 output for the counter value x:
//
//	z = x + 0x9E3779B97F4A7C15
//	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//	return z ^ (z >> 31)                          (all mod 2^64)
//
// Successive outputs of the reference generator seeded with s are SplitMix64(s),
// SplitMix64(s+φ), SplitMix64(s+2φ), ... with φ = 0x9E3779B97F4A7C15. gotron's mock data
// (docs/SEMANTICS.md § Mock data) is defined with this function.
func SplitMix64(x uint64) uint64 {
	z := x + golden
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Golden is SplitMix64's increment φ: word n of a counter stream with key k is
// SplitMix64(k + n·Golden).
const Golden = golden

// Derive returns the key of the sub-stream v of the stream with key k: a keyed hash, so
// that (k, v) pairs that differ give unrelated keys. Counter-based draws (dropout masks
// keyed by a layer, a sample and a position) name their stream by deriving, one
// coordinate at a time.
func Derive(k, v uint64) uint64 { return SplitMix64(SplitMix64(k) ^ v) }
