package data

import (
	"math/big"
	"testing"
)

// refSplitmix64 re-derives the SplitMix64 finaliser with arbitrary-precision arithmetic
// reduced mod 2^64 at each step, independently of the uint64 wrap-around of Splitmix64.
func refSplitmix64(x uint64) uint64 {
	mod := new(big.Int).Lsh(big.NewInt(1), 64)
	z := new(big.Int).SetUint64(x)
	z.Add(z, new(big.Int).SetUint64(0x9E3779B97F4A7C15)).Mod(z, mod)
	step := func(shift uint, mul uint64) {
		s := new(big.Int).Rsh(z, shift)
		z.Xor(z, s).Mul(z, new(big.Int).SetUint64(mul)).Mod(z, mod)
	}
	step(30, 0xBF58476D1CE4E5B9)
	step(27, 0x94D049BB133111EB)
	z.Xor(z, new(big.Int).Rsh(z, 31))
	return z.Uint64()
}

func TestSplitmix64KnownValues(t *testing.T) {
	// The first outputs of Vigna's splitmix64.c seeded with 0, i.e. the finaliser at
	// k·0x9E3779B97F4A7C15 (also recomputed with Python integers).
	want := []uint64{0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC}
	r := splitmix{}
	for k, w := range want {
		if got := r.next(); got != w {
			t.Errorf("output %d = %#x, want %#x", k, got, w)
		}
	}
	if got := Splitmix64(0); got != 0xE220A8397B1DCDAF {
		t.Errorf("Splitmix64(0) = %#x", got)
	}
	if got := refSplitmix64(0); got != 0xE220A8397B1DCDAF {
		t.Errorf("reference splitmix64(0) = %#x: the reference is wrong", got)
	}
}

func TestSplitmix64AgainstReference(t *testing.T) {
	x := uint64(1)
	for i := 0; i < 200; i++ {
		if got, want := Splitmix64(x), refSplitmix64(x); got != want {
			t.Fatalf("Splitmix64(%#x) = %#x, reference %#x", x, got, want)
		}
		x = x*6364136223846793005 + 1442695040888963407 // a different generator for inputs
	}
	for _, x := range []uint64{0, 1, 1<<63 - 1, 1 << 63, ^uint64(0), ^uint64(0) - 0x9E3779B97F4A7C15} {
		if got, want := Splitmix64(x), refSplitmix64(x); got != want {
			t.Errorf("Splitmix64(%#x) = %#x, reference %#x", x, got, want)
		}
	}
}

// refPermutation is the Fisher-Yates shuffle written out from its definition in the
// TextDataset doc, on the reference generator.
func refPermutation(n int, seed uint64) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for k, i := uint64(0), n-1; i > 0; k, i = k+1, i-1 {
		j := int(refSplitmix64(seed+k*0x9E3779B97F4A7C15) % uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

func TestPermutation(t *testing.T) {
	// Recomputed with Python integers from the documented algorithm.
	want := []int{8, 1, 5, 9, 0, 4, 3, 2, 6, 7}
	if got := permutation(10, 7); !equalInts(got, want) {
		t.Errorf("permutation(10, 7) = %v, want %v", got, want)
	}
	for _, n := range []int{0, 1, 2, 5, 97} {
		got, ref := permutation(n, 42), refPermutation(n, 42)
		if !equalInts(got, ref) {
			t.Errorf("permutation(%d, 42) = %v, reference %v", n, got, ref)
		}
		seen := make([]bool, n)
		for _, v := range got {
			if v < 0 || v >= n || seen[v] {
				t.Fatalf("permutation(%d) = %v is not a permutation", n, got)
			}
			seen[v] = true
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
