package config

import "fmt"

// Recompute holds the activation-recompute settings of a TransformerConfig
// (Megatron-Core's recompute_granularity, recompute_method,
// recompute_num_layers and distribute_saved_activations), arXiv 2205.05198.
type Recompute struct {
	// RecomputeGranularity is "" (none: every activation is kept), "full"
	// (a whole transformer layer is recomputed in backward; only its input
	// is kept) or "selective" (only the attention core is recomputed).
	RecomputeGranularity string `json:"recompute_granularity,omitempty"`
	// RecomputeMethod says which layers full recompute covers: "uniform"
	// (the layers are divided into chunks of RecomputeNumLayers, each
	// checkpointed as a unit) or "block" (the first RecomputeNumLayers
	// layers of each pipeline stage are checkpointed one by one, the rest
	// keep their activations).
	RecomputeMethod string `json:"recompute_method,omitempty"`
	// RecomputeNumLayers is the chunk size (uniform) or the number of
	// checkpointed layers per stage (block); 0 means unset, and must stay
	// unset for selective recompute.
	RecomputeNumLayers int `json:"recompute_num_layers,omitempty"`
	// DistributeSavedActivations keeps each checkpoint's input split across
	// the tensor-parallel group (1-D chunks), gathered back in backward.
	DistributeSavedActivations bool `json:"distribute_saved_activations,omitempty"`
}

// recomputeViolations checks the rules of TransformerConfig.__post_init__
// for recompute, in its order, with gotron's messages.
func (c TransformerConfig) recomputeViolations(vs *violationList) {
	r := c.Recompute
	perStage := c.NumLayers / max(c.PipelineModelParallelSize, 1)
	switch r.RecomputeGranularity {
	case "":
		if r.RecomputeMethod != "" || r.RecomputeNumLayers != 0 || r.DistributeSavedActivations {
			vs.add(fieldList("recompute_granularity", "recompute_method", "recompute_num_layers", "distribute_saved_activations"),
				"recompute_method %q, recompute_num_layers %d and distribute_saved_activations %v take effect only with recompute_granularity set: set --recompute-granularity full (or selective) or drop them",
				r.RecomputeMethod, r.RecomputeNumLayers, r.DistributeSavedActivations)
		}
		return
	case "full", "selective":
	default:
		vs.add(fieldList("recompute_granularity"),
			"recompute_granularity %q: must be \"full\" or \"selective\" (or unset for no recompute)", r.RecomputeGranularity)
		return
	}
	switch {
	case r.RecomputeMethod != "" && r.RecomputeMethod != "uniform" && r.RecomputeMethod != "block":
		vs.add(fieldList("recompute_method"), "recompute_method %q: must be \"block\" or \"uniform\"", r.RecomputeMethod)
	case r.RecomputeMethod == "" && r.RecomputeGranularity == "full":
		vs.add(fieldList("recompute_granularity", "recompute_method"),
			"recompute_granularity \"full\" needs recompute_method \"block\" or \"uniform\": set --recompute-method")
	case r.RecomputeMethod != "" && r.RecomputeGranularity == "selective":
		vs.add(fieldList("recompute_granularity", "recompute_method"),
			"recompute_method %q applies to full recompute only; selective recompute covers the attention core of every layer: drop --recompute-method", r.RecomputeMethod)
	}
	if r.RecomputeGranularity == "full" && (r.RecomputeNumLayers < 1 || perStage > 0 && r.RecomputeNumLayers > perStage) {
		vs.add(fieldList("recompute_granularity", "recompute_num_layers"),
			"recompute_granularity \"full\": recompute_num_layers is %d; it must be between 1 and the layers per pipeline stage, %s: set --recompute-num-layers",
			r.RecomputeNumLayers, fmt.Sprintf("num_layers / pipeline_model_parallel_size = %d", perStage))
	}
	if r.RecomputeGranularity == "selective" && r.RecomputeNumLayers != 0 {
		vs.add(fieldList("recompute_granularity", "recompute_num_layers"),
			"recompute_granularity \"selective\": recompute_num_layers must be unset (it is %d); drop --recompute-num-layers", r.RecomputeNumLayers)
	}
	if r.DistributeSavedActivations && c.SequenceParallel {
		vs.add(fieldList("distribute_saved_activations", "sequence_parallel"),
			"distribute_saved_activations must be false when sequence_parallel is enabled: the saved activations are already split along the sequence; drop one of them")
	}
	if r.DistributeSavedActivations && r.RecomputeGranularity != "full" {
		vs.add(fieldList("distribute_saved_activations", "recompute_granularity"),
			"distribute_saved_activations splits the inputs of fully recomputed layers; it needs recompute_granularity \"full\"")
	}
}

// RecomputeLayer reports whether layer i (0-based, within the stage's
// layers) runs under full recompute, and whether it starts a checkpointed
// chunk of how many layers: uniform checkpoints layers [k·n, (k+1)·n) as
// one unit, block checkpoints each of the first n layers alone.
func (c TransformerConfig) RecomputeLayer(i, layers int) (start bool, chunk int) {
	r := c.Recompute
	if r.RecomputeGranularity != "full" || r.RecomputeNumLayers < 1 {
		return false, 0
	}
	n := r.RecomputeNumLayers
	switch r.RecomputeMethod {
	case "uniform":
		if i%n == 0 {
			return true, min(n, layers-i)
		}
	case "block":
		if i < n {
			return true, 1
		}
	}
	return false, 0
}

// PaddedVocabSize returns the vocabulary the embedding and output layer
// hold: VocabSize rounded up to a multiple of make_vocab_size_divisible_by ×
// tensor_model_parallel_size (Megatron's _vocab_size_with_padding). The
// padding rows are never looked up and their logits are excluded from the
// softmax (DECISIONS.md), so they change neither loss nor gradients.
func (c TransformerConfig) PaddedVocabSize() int {
	m := max(c.MakeVocabSizeDivisibleBy, 1) * max(c.TensorModelParallelSize, 1)
	return (c.VocabSize + m - 1) / m * m
}
