package moe

import (
	"fmt"
	"math"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

func randn(seed uint64, n int, std float64) []float32 {
	x := make([]float32, n)
	rng.New(seed).FillNormal(x, 0, std)
	return x
}

// checkGrad compares an analytic gradient with central differences of f
// (float32 arithmetic: step 1e-2, tolerance 2e-3 of the largest entry).
func checkGrad(t *testing.T, what string, x []float32, grad []float32, f func([]float32) float64) {
	t.Helper()
	const h = 1e-2
	var worst, scale float64
	for i := range x {
		scale = math.Max(scale, math.Abs(float64(grad[i])))
	}
	for i := range x {
		old := x[i]
		x[i] = old + h
		up := f(x)
		x[i] = old - h
		down := f(x)
		x[i] = old
		num := (up - down) / (2 * h)
		worst = math.Max(worst, math.Abs(num-float64(grad[i])))
	}
	if worst > 2e-3*math.Max(scale, 1e-3) {
		t.Errorf("%s: gradient differs from central differences by %.3g (largest entry %.3g)", what, worst, scale)
	}
}

// TestRoutingGradient checks Routing.Backward against central differences
// of Σ w·Probs for each score function, away from ties of the top-k (the
// choice stays fixed under the small steps).
func TestRoutingGradient(t *testing.T) {
	const T, E = 6, 8
	for _, o := range []RouterOptions{
		{NumExperts: E, TopK: 2},
		{NumExperts: E, TopK: 3, ScalingFactor: 2.5},
		{NumExperts: E, TopK: 2, PreSoftmax: true},
		{NumExperts: E, TopK: 1, ScoreFunction: Sigmoid},
		{NumExperts: E, TopK: 2, ScoreFunction: Sigmoid, ExpertBias: randn(3, E, 0.1)},
		{NumExperts: E, TopK: 4, NumGroups: 4, GroupTopK: 2},
	} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			logits, w := randn(1, T*E, 2), randn(2, T*E, 1)
			r, err := Route(logits, T, o)
			if err != nil {
				t.Fatal(err)
			}
			loss := func(x []float32) float64 {
				q, err := Route(x, T, o)
				if err != nil {
					t.Fatal(err)
				}
				for i := range q.Indices {
					if q.Indices[i] != r.Indices[i] {
						t.Fatal("a finite-difference step changed the top-k: pick other logits")
					}
				}
				var s float64
				for i, p := range q.Probs {
					s += float64(p * w[i])
				}
				return s
			}
			checkGrad(t, "routing", logits, r.Backward(w), loss)
		})
	}
}

// TestAuxAndZLossGradients checks the load-balancing, sequence-level and
// z losses' gradients with respect to the logits.
func TestAuxAndZLossGradients(t *testing.T) {
	const s, b, E, k = 4, 3, 8, 2
	for _, fn := range []string{Softmax, Sigmoid} {
		logits := randn(5, s*b*E, 1)
		a, err := NewAuxScores(logits, s*b, E, k, fn)
		if err != nil {
			t.Fatal(err)
		}
		tokens := TokensPerExpert(a.Map, E)
		_, d := LoadBalancingLoss(a.Scores, tokens, s*b, E, k, 0.01)
		checkGrad(t, fn+" load balancing", logits, a.Backward(d), func(x []float32) float64 {
			q, _ := NewAuxScores(x, s*b, E, k, fn)
			l, _ := LoadBalancingLoss(q.Scores, tokens, s*b, E, k, 0.01) // counts held fixed, as in the reference
			return l
		})
		_, ds, err := a.SeqLoadBalancingLoss(s, b, TokensPerExpert(a.Map, b*a.E), s, 0.01)
		if err != nil {
			t.Fatal(err)
		}
		seqTokens := TokensPerExpert(a.Map, b*E)
		checkGrad(t, fn+" sequence load balancing", logits, a.Backward(ds), func(x []float32) float64 {
			q, _ := NewAuxScores(x, s*b, E, k, fn)
			l, _ := LoadBalancingLoss(q.Scores, seqTokens, s, E, k, 0.01)
			return l / b
		})
	}
	logits := randn(6, 5*E, 3)
	_, d := ZLoss(logits, 5, E, 0.001)
	checkGrad(t, "z loss", logits, d, func(x []float32) float64 { l, _ := ZLoss(x, 5, E, 0.001); return l })
}

// TestUpdateExpertBias is the reference's test vector (docs/SEMANTICS.md
// § Mixture of experts): tokens [0, 2] summed over the ranks, rate 0.25 →
// [0.25, −0.25].
func TestUpdateExpertBias(t *testing.T) {
	bias := []float32{0, 0}
	UpdateExpertBias(bias, []float32{0 + 0, 2 + 0}, 0.25)
	if bias[0] != 0.25 || bias[1] != -0.25 {
		t.Errorf("bias %v, want [0.25 -0.25]", bias)
	}
	UpdateExpertBias(bias, []float32{3, 3}, 0.25)
	if bias[0] != 0.25 || bias[1] != -0.25 {
		t.Errorf("balanced tokens moved the bias to %v", bias)
	}
}

// TestDropKeepsCapacity: after Drop every expert holds at most its
// capacity (exactly it when padded), the probs policy keeps the largest
// probabilities and the position policy the earliest tokens.
func TestDropKeepsCapacity(t *testing.T) {
	const T, E = 12, 4
	for _, pol := range []string{DropByProbs, DropByPosition} {
		for _, pad := range []bool{false, true} {
			r, err := Route(randn(9, T*E, 2), T, RouterOptions{NumExperts: E, TopK: 2})
			if err != nil {
				t.Fatal(err)
			}
			before := append([]float32(nil), r.Probs...)
			c, err := r.Drop(DropOptions{CapacityFactor: 0.5, Policy: pol, PadToCapacity: pad})
			if err != nil {
				t.Fatal(err)
			}
			if c != Capacity(T*2, E, 0.5) || c != 3 {
				t.Fatalf("capacity %d, want 3", c)
			}
			for j := 0; j < E; j++ {
				n, first := 0, -1
				for i := 0; i < T; i++ {
					if r.Map[i*E+j] {
						n++
					}
				}
				if n > c || pad && n != c {
					t.Errorf("%s pad=%v: expert %d holds %d tokens, capacity %d", pol, pad, j, n, c)
				}
				for i := 0; i < T && pol == DropByPosition && !pad; i++ {
					if before[i*E+j] != 0 && !r.Map[i*E+j] && first < 0 {
						first = i // the first dropped routed token: no later one is kept
					}
					if first >= 0 && r.Map[i*E+j] {
						t.Errorf("position policy: expert %d drops token %d but keeps token %d", j, first, i)
					}
				}
			}
		}
	}
	r, _ := Route(randn(9, T*E, 2), T, RouterOptions{NumExperts: E, TopK: 2})
	for _, bad := range []DropOptions{{CapacityFactor: 0}, {CapacityFactor: math.NaN()}, {CapacityFactor: -1}, {CapacityFactor: 1, Policy: "random"}} {
		if _, err := r.Drop(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestRouterOptionsRefused lists settings that cannot route.
func TestRouterOptionsRefused(t *testing.T) {
	for _, o := range []RouterOptions{
		{NumExperts: 0, TopK: 1}, {NumExperts: 4, TopK: 5}, {NumExperts: 4, TopK: 0},
		{NumExperts: 4, TopK: 1, ScoreFunction: "relu"},
		{NumExperts: 4, TopK: 1, ExpertBias: []float32{0, 0, 0, 0}},
		{NumExperts: 4, TopK: 1, ScoreFunction: Sigmoid, ExpertBias: []float32{0}},
		{NumExperts: 6, TopK: 2, NumGroups: 4, GroupTopK: 2},
		{NumExperts: 8, TopK: 2, NumGroups: 4},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
