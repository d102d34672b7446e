package moe

import (
	"fmt"
	"math"
	"sort"
)

// Token-drop policies (moe_token_drop_policy).
const (
	DropByProbs    = "probs"
	DropByPosition = "position"
)

// Capacity is an expert's capacity for tokens routed tokens over e experts:
// ⌈tokens/e · factor⌉ (get_capacity).
func Capacity(tokens, e int, factor float64) int {
	return int(math.Ceil(float64(tokens) / float64(e) * factor))
}

// DropOptions are the capacity settings of the router.
type DropOptions struct {
	// CapacityFactor sets each expert's capacity to
	// Capacity(T·k, E, CapacityFactor) (moe_expert_capacity_factor).
	CapacityFactor float64
	// Policy chooses the tokens an expert keeps: "probs" (the default,
	// also "") its capacity's highest routing probabilities, "position"
	// its first tokens in token order (moe_token_drop_policy).
	Policy string
	// PadToCapacity gives every expert exactly its capacity of tokens,
	// padding with tokens not routed to it at probability zero
	// (moe_pad_expert_input_to_capacity).
	PadToCapacity bool
}

// Drop applies expert capacity to r in place (apply_router_token_dropping):
// with c = Capacity(T·k, E, factor), when c < T each expert keeps c tokens
// by the policy — the highest probabilities (ties to the earlier token),
// or its first c routed tokens in token order — and the others are
// dropped (map false, probability 0); with PadToCapacity the map becomes
// the kept set itself, so every expert has exactly c tokens. It returns c.
//
// Megatron's "position" policy takes a top-k over the 0/1 routing map,
// whose order among equal entries is unspecified; gotron defines it as
// token order, the policy's intent.
func (r *Routing) Drop(o DropOptions) (int, error) {
	if !(o.CapacityFactor > 0) || math.IsInf(o.CapacityFactor, 0) {
		return 0, fmt.Errorf("moe: expert capacity factor %g: it must be a positive number", o.CapacityFactor)
	}
	if o.Policy != "" && o.Policy != DropByProbs && o.Policy != DropByPosition {
		return 0, fmt.Errorf("moe: token drop policy %q: choose probs or position", o.Policy)
	}
	t, e := r.T, r.E
	c := Capacity(t*r.K, e, o.CapacityFactor)
	keep := make([]bool, t*e)
	if c > t {
		for i := range keep {
			keep[i] = true
		}
	} else {
		rows := make([]int, t)
		for j := 0; j < e; j++ {
			for i := range rows {
				rows[i] = i
			}
			if o.Policy == DropByPosition {
				// Routed tokens first, each group in token order.
				sort.SliceStable(rows, func(a, b int) bool { return r.Map[rows[a]*e+j] && !r.Map[rows[b]*e+j] })
			} else {
				sort.SliceStable(rows, func(a, b int) bool { return r.Probs[rows[a]*e+j] > r.Probs[rows[b]*e+j] })
			}
			for _, i := range rows[:c] {
				keep[i*e+j] = true
			}
		}
	}
	for i := range keep {
		m := keep[i]
		if !o.PadToCapacity {
			m = m && r.Map[i]
		}
		r.Map[i] = m
		if !m {
			r.Probs[i] = 0
		}
	}
	return c, nil
}
