package data

// Splitmix64 is the SplitMix64 finaliser (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", OOPSLA 2014; the constants of Vigna's splitmix64.c),
// all arithmetic mod 2^64:
//
//	z = x + 0x9E3779B97F4A7C15
//	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//	return z ^ (z >> 31)
//
// Splitmix64(0) = 0xE220A8397B1DCDAF. It is the hash behind the mock data, the document
// split and the sample order, chosen because it is a few lines in any language.
func Splitmix64(x uint64) uint64 {
	z := x + splitmixGamma
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// splitmixGamma is the SplitMix64 increment, 2^64 divided by the golden ratio.
const splitmixGamma = 0x9E3779B97F4A7C15

// splitmix is the SplitMix64 generator: the k-th output (k = 0, 1, ...) of the generator
// seeded with s is Splitmix64(s + k·0x9E3779B97F4A7C15).
type splitmix struct{ state uint64 }

// next returns the next output.
func (r *splitmix) next() uint64 {
	v := Splitmix64(r.state)
	r.state += splitmixGamma
	return v
}

// permutation returns a permutation of 0..n-1 drawn by the Fisher-Yates shuffle from the
// SplitMix64 generator seeded with seed:
//
//	p = [0, 1, ..., n-1]
//	for i = n-1 down to 1: j = next() mod (i+1); swap p[i], p[j]
//
// The modulo has a bias below n/2^64, negligible and kept for reproducibility elsewhere.
func permutation(n int, seed uint64) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r := splitmix{state: seed}
	for i := n - 1; i > 0; i-- {
		j := int(r.next() % uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}
