package moe

import (
	"fmt"
	"math"
	"sort"
)

// Score functions (moe_router_score_function).
const (
	Softmax = "softmax"
	Sigmoid = "sigmoid"
)

// RouterOptions are the routing settings of Megatron's TopKRouter.
type RouterOptions struct {
	NumExperts int // E (num_moe_experts)
	TopK       int // k (moe_router_topk)
	// ScoreFunction is "softmax" (the default, also "") or "sigmoid"
	// (moe_router_score_function).
	ScoreFunction string
	// PreSoftmax takes the softmax over all experts before the top-k
	// (moe_router_pre_softmax); otherwise over the k chosen logits.
	PreSoftmax bool
	// NumGroups and GroupTopK limit each token to its GroupTopK best of
	// NumGroups consecutive expert groups (moe_router_num_groups,
	// moe_router_group_topk); 0: no limit.
	NumGroups, GroupTopK int
	// ScalingFactor multiplies the routing probabilities
	// (moe_router_topk_scaling_factor); 0: none.
	ScalingFactor float64
	// ExpertBias [E], with the sigmoid score, is added to the scores to
	// choose the experts (not to the probabilities):
	// moe_router_enable_expert_bias. nil: none.
	ExpertBias []float32
}

// Validate reports settings that cannot route.
func (o RouterOptions) Validate() error {
	switch {
	case o.NumExperts < 1:
		return fmt.Errorf("moe: %d experts: there must be at least one", o.NumExperts)
	case o.TopK < 1 || o.TopK > o.NumExperts:
		return fmt.Errorf("moe: top-%d routing over %d experts: k must lie in [1, %d]", o.TopK, o.NumExperts, o.NumExperts)
	case o.ScoreFunction != "" && o.ScoreFunction != Softmax && o.ScoreFunction != Sigmoid:
		return fmt.Errorf("moe: score function %q: choose softmax or sigmoid", o.ScoreFunction)
	case o.ExpertBias != nil && len(o.ExpertBias) != o.NumExperts:
		return fmt.Errorf("moe: an expert bias of %d values for %d experts", len(o.ExpertBias), o.NumExperts)
	case o.ExpertBias != nil && o.ScoreFunction != Sigmoid:
		return fmt.Errorf("moe: the expert bias routes sigmoid scores: set the score function to sigmoid")
	case (o.NumGroups > 0) != (o.GroupTopK > 0):
		return fmt.Errorf("moe: group-limited routing needs both the number of groups (%d) and the groups per token (%d)", o.NumGroups, o.GroupTopK)
	case o.NumGroups > 0 && (o.NumExperts%o.NumGroups != 0 || o.GroupTopK > o.NumGroups || o.TopK%o.GroupTopK != 0 || o.TopK/o.GroupTopK > o.NumExperts/o.NumGroups):
		return fmt.Errorf("moe: %d experts in %d groups, %d groups per token, top-%d: the groups must divide the experts, the groups per token divide k and be at most the groups, and k/groups per token be at most a group's experts", o.NumExperts, o.NumGroups, o.GroupTopK, o.TopK)
	}
	return nil
}

func (o RouterOptions) sigmoid() bool { return o.ScoreFunction == Sigmoid }

// Routing is the result of Route for T tokens.
type Routing struct {
	T, E, K int
	// Probs [T, E] are the routing probabilities, zero where a token is
	// not routed; Map [T, E] says where it is.
	Probs []float32
	Map   []bool
	// Indices [T, k] are each token's chosen experts, best first.
	Indices []int
	// scores [T, E] are what the probabilities were taken from: the
	// softmax over all experts (pre-softmax), the sigmoid, or (softmax of
	// the chosen logits) the chosen softmax at Indices; Backward reads them.
	scores []float32
	o      RouterOptions
}

// Route is Megatron's topk_routing_with_score_function on logits [T, E]:
//
//	softmax:             p = softmax(top-k of the logits)
//	softmax, pre:        s = softmax(logits); p = top-k of s
//	sigmoid:             s = σ(logits); chosen by s + bias; p = s/(Σ_chosen s + 1e-20) (k > 1)
//
// then p ×= ScalingFactor. Group-limited routing first keeps each token's
// GroupTopK groups whose top k/GroupTopK scores sum highest. Ties go to the
// lower expert index. Everything is float32 but the softmax sums (float64).
func Route(logits []float32, t int, o RouterOptions) (*Routing, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	e, k := o.NumExperts, o.TopK
	if len(logits) != t*e {
		return nil, fmt.Errorf("moe: %d logits for %d tokens and %d experts", len(logits), t, e)
	}
	r := &Routing{T: t, E: e, K: k, Probs: make([]float32, t*e), Map: make([]bool, t*e), Indices: make([]int, t*k), scores: make([]float32, t*e), o: o}
	sel := make([]float32, e)
	for i := 0; i < t; i++ {
		row := logits[i*e : (i+1)*e]
		s := r.scores[i*e : (i+1)*e]
		idx := r.Indices[i*k : (i+1)*k]
		switch {
		case o.sigmoid():
			for j, v := range row {
				s[j] = sigmoid32(v)
				sel[j] = s[j]
				if o.ExpertBias != nil {
					sel[j] = s[j] + o.ExpertBias[j]
				}
			}
		case o.PreSoftmax:
			softmaxRow(s, row)
			copy(sel, s)
		default:
			copy(sel, row)
		}
		topK(idx, sel, o)
		p := r.Probs[i*e : (i+1)*e]
		switch {
		case o.sigmoid():
			var sum float32
			for _, j := range idx {
				sum += s[j]
			}
			for _, j := range idx {
				p[j] = s[j]
				if k > 1 {
					p[j] = s[j] / (sum + 1e-20)
				}
			}
		case o.PreSoftmax:
			for _, j := range idx {
				p[j] = s[j]
			}
		default:
			chosen := make([]float32, k)
			for c, j := range idx {
				chosen[c] = row[j]
			}
			softmaxRow(chosen, chosen)
			for c, j := range idx {
				p[j] = chosen[c]
				s[j] = chosen[c]
			}
		}
		if o.ScalingFactor != 0 {
			for _, j := range idx {
				p[j] *= float32(o.ScalingFactor)
			}
		}
		for _, j := range idx {
			r.Map[i*e+j] = true
		}
	}
	return r, nil
}

// topK writes the indices of the k largest scores into idx, best first
// (ties to the lower index), within the token's best groups when o limits
// them.
func topK(idx []int, scores []float32, o RouterOptions) {
	e := len(scores)
	allowed := func(int) bool { return true }
	if o.NumGroups > 0 {
		per := e / o.NumGroups
		groupScore := make([]float32, o.NumGroups)
		for g := range groupScore {
			best := make([]int, o.TopK/o.GroupTopK)
			order(best, scores[g*per:(g+1)*per], nil)
			for _, j := range best {
				groupScore[g] += scores[g*per+j]
			}
		}
		groups := make([]int, o.GroupTopK)
		order(groups, groupScore, nil)
		keep := make([]bool, o.NumGroups)
		for _, g := range groups {
			keep[g] = true
		}
		allowed = func(j int) bool { return keep[j/per] }
	}
	order(idx, scores, allowed)
}

// order writes into idx the indices of the len(idx) largest values of v
// that allowed admits (nil: all), largest first, ties to the lower index.
func order(idx []int, v []float32, allowed func(int) bool) {
	all := make([]int, 0, len(v))
	for j := range v {
		if allowed == nil || allowed(j) {
			all = append(all, j)
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return v[all[a]] > v[all[b]] })
	copy(idx, all)
}

// Backward returns the gradient with respect to the logits [T, E] of
// Σ dProbs·Probs, for dProbs [T, E]: only each token's chosen experts
// (Indices) carry gradient; token dropping zeroes a dropped entry's
// probability, and its dProbs must be zero (the caller's, as the combine
// step gives), while padding adds entries that carry none.
func (r *Routing) Backward(dProbs []float32) []float32 {
	e, k, o := r.E, r.K, r.o
	d := make([]float32, r.T*e)
	scale := float32(1)
	if o.ScalingFactor != 0 {
		scale = float32(o.ScalingFactor)
	}
	for i := 0; i < r.T; i++ {
		idx := r.Indices[i*k : (i+1)*k]
		s := r.scores[i*e : (i+1)*e]
		g := dProbs[i*e : (i+1)*e]
		out := d[i*e : (i+1)*e]
		switch {
		case o.sigmoid():
			var sum float32
			for _, j := range idx {
				sum += s[j]
			}
			den := sum + 1e-20
			var dot float32 // Σ g_j·s_j over the chosen, for the normalisation
			for _, j := range idx {
				dot += g[j] * scale * s[j]
			}
			for _, j := range idx {
				ds := g[j] * scale
				if k > 1 {
					ds = ds/den - dot/(den*den)
				}
				out[j] = ds * s[j] * (1 - s[j])
			}
		case o.PreSoftmax:
			var dot float64
			for _, j := range idx {
				dot += float64(g[j] * scale * s[j])
			}
			for j := range out {
				out[j] = -s[j] * float32(dot)
			}
			for _, j := range idx {
				out[j] += s[j] * g[j] * scale
			}
		default:
			var dot float64
			for _, j := range idx {
				dot += float64(g[j] * scale * s[j])
			}
			for _, j := range idx {
				out[j] = s[j] * (g[j]*scale - float32(dot))
			}
		}
	}
	return d
}

// softmaxRow sets dst = softmax(x) (dst may alias x), the sum in float64.
func softmaxRow(dst, x []float32) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	var sum float64
	for j, v := range x {
		ev := float32(math.Exp(float64(v - m)))
		dst[j] = ev
		sum += float64(ev)
	}
	for j := range dst[:len(x)] {
		dst[j] = float32(float64(dst[j]) / sum)
	}
}

// sigmoid32 is 1/(1 + e^(−x)) in float32.
func sigmoid32(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }
