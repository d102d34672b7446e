package kernels

import (
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

func TestDropoutStatisticsAndScale(t *testing.T) {
	const n = 200001 // odd: the tail element
	for _, pd := range []float64{0.1, 0.5, 0.9} {
		p := float32(pd)
		g := rng.New(17)
		x := normal(g, n, 0, 1)
		y := make([]float32, n)
		mask := make([]byte, n)
		Dropout(y, mask, x, p, g)
		scale := 1 / float32(1-pd) // 1 − p from the decimal p, the division in float32
		kept := 0
		for i := range x {
			switch mask[i] {
			case 1:
				kept++
				if y[i] != x[i]*scale {
					t.Fatalf("p=%v: kept y[%d] = %v, want x·scale = %v", p, i, y[i], x[i]*scale)
				}
			case 0:
				if y[i] != 0 {
					t.Fatalf("p=%v: dropped y[%d] = %v, want 0", p, i, y[i])
				}
			default:
				t.Fatalf("mask[%d] = %d, want 0 or 1", i, mask[i])
			}
		}
		// Kept count ~ Binomial(n, 1−p): 5 sigma.
		q := 1 - pd
		if sd := math.Sqrt(n * q * (1 - q)); math.Abs(float64(kept)-n*q) > 5*sd {
			t.Errorf("p=%v: kept %d of %d, want %v ± %v", p, kept, n, n*q, 5*sd)
		}
		// Neighbouring elements are independent: the pairs (2k, 2k+1) share a draw.
		both := 0
		for i := 0; i+1 < n; i += 2 {
			if mask[i] == 1 && mask[i+1] == 1 {
				both++
			}
		}
		pairs := float64(n / 2)
		if sd := math.Sqrt(pairs * q * q * (1 - q*q)); math.Abs(float64(both)-pairs*q*q) > 5*sd {
			t.Errorf("p=%v: both of a pair kept %d times, want %v ± %v", p, both, pairs*q*q, 5*sd)
		}
	}
}

func TestDropoutReplayAndAliasing(t *testing.T) {
	g := rng.New(18)
	x := normal(g, 1001, 0, 1)
	st := g.State()
	y, mask := make([]float32, len(x)), make([]byte, len(x))
	Dropout(y, mask, x, 0.3, g)
	after := g.State()

	// Restoring the state replays the same mask; y may alias x.
	g.SetState(st)
	xc, mask2 := clone(x), make([]byte, len(x))
	Dropout(xc, mask2, xc, 0.3, g)
	checkClose(t, "replayed y in place", xc, to64(y), 0, 0)
	if string(mask2) != string(mask) {
		t.Fatal("replayed mask differs")
	}
	if g.State() != after {
		t.Fatal("replay consumed a different number of draws")
	}
	// ⌈n/2⌉ draws.
	g.SetState(st)
	for i := 0; i < 501; i++ {
		g.Uint64()
	}
	if g.State() != after {
		t.Fatal("Dropout of 1001 elements did not consume 501 Uint64 draws")
	}
}

func TestDropoutBackwardMatchesFiniteDifferences(t *testing.T) {
	g := rng.New(19)
	n, p := 50, float32(0.4)
	x := normal(g, n, 0, 1)
	dy := normal(g, n, 0, 1)
	y, mask := make([]float32, n), make([]byte, n)
	Dropout(y, mask, x, p, g)
	// Reference forward in float64 with the recorded mask: y = x·mask/(1−p).
	loss := func(v []float64) float64 {
		var s float64
		for i := range v {
			s += float64(dy[i]) * v[i] * float64(mask[i]) / (1 - 0.4)
		}
		return s
	}
	dx := make([]float32, n)
	DropoutBackward(dx, dy, mask, p)
	checkClose(t, "dx vs FD", dx, centralDiff(loss, to64(x), 1e-3), 1e-6, 1e-7)
	// In place over dy.
	d := clone(dy)
	DropoutBackward(d, d, mask, p)
	checkClose(t, "dx aliasing dy", d, to64(dx), 0, 0)
}

func TestDropoutEdgeProbabilities(t *testing.T) {
	g := rng.New(20)
	x := normal(g, 9, 0, 1)
	x[3] = float32(math.NaN())
	st := g.State()

	y, mask := make([]float32, 9), make([]byte, 9)
	Dropout(y, mask, x, 0, g)
	for i := range x {
		if mask[i] != 1 || (y[i] != x[i] && x[i] == x[i]) {
			t.Fatalf("p=0: y[%d] = %v, mask %d; want the identity", i, y[i], mask[i])
		}
	}
	Dropout(y, nil, x, 0, g) // mask may be nil for p = 0
	if g.State() != st {
		t.Error("p=0 drew random numbers")
	}
	Dropout(y, mask, x, 1, g)
	for i := range x {
		if mask[i] != 0 || (y[i] != 0 && i != 3) {
			t.Fatalf("p=1: y[%d] = %v, mask %d; want 0", i, y[i], mask[i])
		}
	}
	if y[3] == y[3] {
		t.Errorf("p=1: a dropped NaN gave %v, want NaN (x·0)", y[3])
	}
	if g.State() != st {
		t.Error("p=1 drew random numbers")
	}
	dx := make([]float32, 9)
	DropoutBackward(dx, x, nil, 0)
	if dx[0] != x[0] {
		t.Error("DropoutBackward p=0 is not the identity")
	}
	mustPanic(t, "p = 1.5", func() { Dropout(y, mask, x, 1.5, g) })
	mustPanic(t, "p = NaN", func() { DropoutBackward(dx, x, mask, float32(math.NaN())) })
}
