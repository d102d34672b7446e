package config

import (
	"slices"
	"strings"
)

// CPCommTypes are the values cp_comm_type may take.
var CPCommTypes = []string{"p2p", "all_gather", "a2a", "a2a+p2p"}

// LayerCPCommType returns the cp_comm_type of decoder layer i (global
// index): the one value given for every layer, the layer's own, or "p2p".
func (c TransformerConfig) LayerCPCommType(i int) string {
	switch {
	case len(c.CPCommType) == 0:
		return "p2p"
	case len(c.CPCommType) == 1:
		return c.CPCommType[0]
	case i < len(c.CPCommType):
		return c.CPCommType[i]
	}
	return c.CPCommType[len(c.CPCommType)-1]
}

// contextViolations checks what context parallelism needs of the model:
// the sequence split into 2·cp equal chunks (Megatron's "seq-length should
// be a multiple of 2 * context-parallel-size"), known comm types, one per
// layer when a list, the all-to-all's head split, and the hierarchical
// sizes a2a+p2p requires.
//
// The comm types are checked at every context-parallel size: a value that
// is not a type is an error even where it would not be used.
func (c TransformerConfig) contextViolations(vs *violationList) {
	cp := c.ContextParallelSize
	tp := max(c.TensorModelParallelSize, 1)
	if unit := 2 * cp; cp <= 1 {
		// nothing to split
	} else if c.SeqLength > 0 && c.SeqLength%unit != 0 {
		vs.add(fieldList("seq_length", "context_parallel_size"),
			"seq_length %d is not a multiple of 2·context_parallel_size = 2·%d = %d: the load-balanced split cuts every sequence into 2·cp equal chunks; choose --seq-length a multiple of %d",
			c.SeqLength, cp, unit, unit)
	} else if unit := 2 * cp * tp; c.SequenceParallel && tp > 1 && c.SeqLength > 0 && c.SeqLength%unit != 0 {
		vs.add(fieldList("seq_length", "context_parallel_size", "tensor_model_parallel_size", "sequence_parallel"),
			"seq_length %d is not a multiple of 2·context_parallel_size·tensor_model_parallel_size = 2·%d·%d = %d: with sequence_parallel each context-parallel rank's 2 chunks are split again over the TP ranks; choose --seq-length a multiple of %d, or set sequence_parallel = false (drop --sequence-parallel)",
			c.SeqLength, cp, tp, unit, unit)
	}
	if n := len(c.CPCommType); n > 1 && n != c.NumLayers {
		vs.add(fieldList("cp_comm_type", "num_layers"),
			"cp_comm_type lists %d values for %d layers (num_layers): give one value for every layer, or exactly one per layer (as many values of --cp-comm-type as --num-layers)", n, c.NumLayers)
	}
	heads := c.NumAttentionHeads / tp
	seen := map[string]bool{}
	for _, t := range c.CPCommType {
		if seen[t] {
			continue
		}
		seen[t] = true
		if !slices.Contains(CPCommTypes, t) {
			vs.add(fieldList("cp_comm_type"), "cp_comm_type %q is not one of %s; set --cp-comm-type", t, strings.Join(CPCommTypes, ", "))
			continue
		}
		a := 0
		if cp <= 1 {
			continue
		}
		switch t {
		case "a2a":
			a = cp
		case "a2a+p2p":
			h := c.HierarchicalContextParallelSizes
			if len(h) != 2 {
				vs.add(fieldList("cp_comm_type", "hierarchical_context_parallel_sizes"),
					"cp_comm_type a2a+p2p needs hierarchical_context_parallel_sizes with two levels (the all-to-all size, then the ring size), got %v: set --hierarchical-context-parallel-sizes A P with A·P = %d", h, cp)
				continue
			}
			a = h[0]
		}
		if a > 1 && c.NumAttentionHeads > 0 && heads%a != 0 {
			vs.add(fieldList("cp_comm_type", "num_attention_heads", "tensor_model_parallel_size"),
				"cp_comm_type %s splits each tensor-parallel rank's %d heads (num_attention_heads %d / tensor_model_parallel_size %d) over the %d ranks of its all-to-all: choose --num-attention-heads a multiple of %d·%d = %d, or --cp-comm-type p2p",
				t, heads, c.NumAttentionHeads, tp, a, a, tp, a*tp)
		}
	}
}
