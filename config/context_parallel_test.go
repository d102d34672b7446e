package config

import "testing"

type cpCase = ruleCase[TransformerConfig]

// withCP sets a context-parallel size and, when comm is not empty, the
// comm types (one for every layer, or one per layer).
func withCP(c *TransformerConfig, cp int, comm ...string) {
	c.ContextParallelSize = cp
	if len(comm) > 0 {
		c.CPCommType = comm
	}
}

// runCPCases applies each case to validTransformer (4 layers, hidden 64, 4
// heads, seq 32) and checks what Validate reports.
func runCPCases(t *testing.T, cases []cpCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validTransformer()
			tc.change(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				return
			}
			checkViolations(t, asValidationError(t, err).Violations, tc.want, tc.msg)
		})
	}
}

// TestContextParallelSeqLength covers Megatron's "seq-length should be a
// multiple of 2 * context-parallel-size", and 2·cp·tp under sequence
// parallelism.
func TestContextParallelSeqLength(t *testing.T) {
	runCPCases(t, []cpCase{
		{"seq not a multiple of 2·cp",
			func(c *TransformerConfig) { withCP(c, 2); c.SeqLength = 30 },
			[][]string{{"seq_length", "context_parallel_size"}},
			[]string{"seq_length 30", "2·2 = 4", "--seq-length a multiple of 4"}},
		{"seq a multiple of cp but not of 2·cp",
			func(c *TransformerConfig) { withCP(c, 4); c.SeqLength = 36 },
			[][]string{{"seq_length", "context_parallel_size"}},
			[]string{"seq_length 36", "2·4 = 8", "--seq-length a multiple of 8"}},
		{"seq a multiple of 2·cp is valid",
			func(c *TransformerConfig) { withCP(c, 4); c.SeqLength = 40 }, nil, nil},
		{"seq is not checked at cp 1",
			func(c *TransformerConfig) { withCP(c, 1); c.SeqLength = 31 }, nil, nil},
		{"seq a multiple of 2·cp but not of 2·cp·tp under sequence parallelism",
			func(c *TransformerConfig) {
				withCP(c, 2)
				c.TensorModelParallelSize, c.SequenceParallel, c.SeqLength = 2, true, 36
			},
			[][]string{{"seq_length", "context_parallel_size", "tensor_model_parallel_size", "sequence_parallel"}},
			[]string{"seq_length 36", "2·2·2 = 8", "--seq-length a multiple of 8"}},
		{"seq a multiple of 2·cp·tp under sequence parallelism is valid",
			func(c *TransformerConfig) {
				withCP(c, 2)
				c.TensorModelParallelSize, c.SequenceParallel, c.SeqLength = 2, true, 40
			}, nil, nil},
		{"seq a multiple of 2·cp with tp but without sequence parallelism is valid",
			func(c *TransformerConfig) {
				withCP(c, 2)
				c.TensorModelParallelSize, c.SeqLength = 2, 36
			}, nil, nil},
		// Only the 2·cp rule is reported when it is broken: the 2·cp·tp
		// one would repeat it.
		{"seq not a multiple of 2·cp under sequence parallelism is one violation",
			func(c *TransformerConfig) {
				withCP(c, 2)
				c.TensorModelParallelSize, c.SequenceParallel, c.SeqLength = 2, true, 30
			},
			[][]string{{"seq_length", "context_parallel_size"}},
			[]string{"2·2 = 4"}},
	})
}

// TestContextParallelCommType covers cp_comm_type's values, its per-layer
// list and the head splits of a2a and a2a+p2p.
func TestContextParallelCommType(t *testing.T) {
	runCPCases(t, []cpCase{
		{"unknown comm type",
			func(c *TransformerConfig) { withCP(c, 2, "bogus") },
			[][]string{{"cp_comm_type"}},
			[]string{`"bogus"`, "p2p, all_gather, a2a, a2a+p2p", "--cp-comm-type"}},
		{"an unknown comm type repeated per layer is one violation",
			func(c *TransformerConfig) { withCP(c, 2, "ring", "p2p", "ring", "p2p") },
			[][]string{{"cp_comm_type"}},
			[]string{`"ring"`}},
		{"list shorter than num_layers",
			func(c *TransformerConfig) { withCP(c, 2, "p2p", "a2a") },
			[][]string{{"cp_comm_type", "num_layers"}},
			[]string{"2 values for 4 layers", "one value for every layer", "one per layer"}},
		{"list longer than num_layers",
			func(c *TransformerConfig) { withCP(c, 2, "p2p", "a2a", "p2p", "a2a", "p2p") },
			[][]string{{"cp_comm_type", "num_layers"}},
			[]string{"5 values for 4 layers"}},
		{"one value per layer is valid",
			func(c *TransformerConfig) { withCP(c, 2, "p2p", "all_gather", "a2a", "p2p") }, nil, nil},
		{"a2a with heads not divisible by cp",
			func(c *TransformerConfig) {
				withCP(c, 4, "a2a")
				c.HiddenSize, c.NumAttentionHeads = 48, 6
			},
			[][]string{{"cp_comm_type", "num_attention_heads", "tensor_model_parallel_size"}},
			[]string{"cp_comm_type a2a", "6 heads", "over the 4 ranks", "--num-attention-heads a multiple of 4·1 = 4", "--cp-comm-type p2p"}},
		// 4 heads divide by cp 4, but each of the 2 tensor-parallel ranks
		// holds 2 heads, which do not.
		{"a2a with heads/tp not divisible by cp",
			func(c *TransformerConfig) {
				withCP(c, 4, "a2a")
				c.TensorModelParallelSize = 2
			},
			[][]string{{"cp_comm_type", "num_attention_heads", "tensor_model_parallel_size"}},
			[]string{"2 heads", "num_attention_heads 4 / tensor_model_parallel_size 2", "a multiple of 4·2 = 8"}},
		{"a2a in one layer of a per-layer list",
			func(c *TransformerConfig) {
				withCP(c, 4, "p2p", "p2p", "a2a", "all_gather")
				c.HiddenSize, c.NumAttentionHeads = 48, 6
			},
			[][]string{{"cp_comm_type", "num_attention_heads", "tensor_model_parallel_size"}},
			[]string{"cp_comm_type a2a", "6 heads"}},
		{"a2a with heads/tp divisible by cp is valid",
			func(c *TransformerConfig) {
				withCP(c, 2, "a2a")
				c.TensorModelParallelSize = 2
			}, nil, nil},
		{"p2p and all_gather do not split heads",
			func(c *TransformerConfig) {
				withCP(c, 4, "p2p", "all_gather", "p2p", "all_gather")
				c.HiddenSize, c.NumAttentionHeads = 48, 6
			}, nil, nil},
	})
}

// TestContextParallelHierarchical covers a2a+p2p and its
// hierarchical_context_parallel_sizes.
func TestContextParallelHierarchical(t *testing.T) {
	runCPCases(t, []cpCase{
		{"a2a+p2p without hierarchical sizes",
			func(c *TransformerConfig) { withCP(c, 4, "a2a+p2p") },
			[][]string{{"cp_comm_type", "hierarchical_context_parallel_sizes"}},
			[]string{"a2a+p2p", "two levels", "got []", "--hierarchical-context-parallel-sizes A P", "A·P = 4"}},
		// One level multiplies to cp, so only the two-level rule is broken.
		{"a2a+p2p with one hierarchical level",
			func(c *TransformerConfig) {
				withCP(c, 4, "a2a+p2p")
				c.HierarchicalContextParallelSizes = []int{4}
			},
			[][]string{{"cp_comm_type", "hierarchical_context_parallel_sizes"}},
			[]string{"two levels", "got [4]"}},
		{"a2a+p2p with three hierarchical levels",
			func(c *TransformerConfig) {
				withCP(c, 4, "a2a+p2p")
				c.HierarchicalContextParallelSizes = []int{2, 1, 2}
			},
			[][]string{{"cp_comm_type", "hierarchical_context_parallel_sizes"}},
			[]string{"got [2 1 2]"}},
		{"a2a+p2p with heads/tp not divisible by the all-to-all level",
			func(c *TransformerConfig) {
				withCP(c, 8, "a2a+p2p")
				c.HierarchicalContextParallelSizes = []int{4, 2}
				c.HiddenSize, c.NumAttentionHeads = 48, 6
			},
			[][]string{{"cp_comm_type", "num_attention_heads", "tensor_model_parallel_size"}},
			[]string{"cp_comm_type a2a+p2p", "6 heads", "over the 4 ranks", "a multiple of 4·1 = 4", "--cp-comm-type p2p"}},
		{"a2a+p2p with heads/tp divisible by the all-to-all level is valid",
			func(c *TransformerConfig) {
				withCP(c, 8, "a2a+p2p")
				c.HierarchicalContextParallelSizes = []int{2, 4}
				c.HiddenSize, c.NumAttentionHeads = 48, 6
			}, nil, nil},
		// The product rule is ModelParallelConfig's
		// (TestModelParallelContextParallel); Validate reports it with
		// a2a+p2p alone.
		{"a2a+p2p with hierarchical sizes not multiplying to cp",
			func(c *TransformerConfig) {
				withCP(c, 2, "a2a+p2p")
				c.HierarchicalContextParallelSizes = []int{2, 2}
			},
			[][]string{{"hierarchical_context_parallel_sizes", "context_parallel_size"}},
			[]string{"2·2 = 4", "context_parallel_size = 2"}},
	})
}

// TestContextParallelValid checks that every comm type passes with sizes
// that fit it.
func TestContextParallelValid(t *testing.T) {
	runCPCases(t, []cpCase{
		{"cp 2, comm type unset (p2p)", func(c *TransformerConfig) { withCP(c, 2) }, nil, nil},
		{"cp 2, p2p", func(c *TransformerConfig) { withCP(c, 2, "p2p") }, nil, nil},
		{"cp 4, all_gather", func(c *TransformerConfig) { withCP(c, 4, "all_gather") }, nil, nil},
		{"cp 4, a2a", func(c *TransformerConfig) { withCP(c, 4, "a2a") }, nil, nil},
		{"cp 4, a2a+p2p 2·2", func(c *TransformerConfig) {
			withCP(c, 4, "a2a+p2p")
			c.HierarchicalContextParallelSizes = []int{2, 2}
		}, nil, nil},
		{"cp 2, tp 2, sequence parallel, a2a", func(c *TransformerConfig) {
			withCP(c, 2, "a2a")
			c.TensorModelParallelSize, c.SequenceParallel = 2, true
		}, nil, nil},
	})
}

func TestLayerCPCommType(t *testing.T) {
	for _, tc := range []struct {
		name string
		comm []string
		want []string // layers 0..5
	}{
		{"empty is p2p", nil, []string{"p2p", "p2p", "p2p", "p2p", "p2p", "p2p"}},
		{"one value for every layer", []string{"a2a"}, []string{"a2a", "a2a", "a2a", "a2a", "a2a", "a2a"}},
		{"one per layer", []string{"p2p", "all_gather", "a2a", "a2a+p2p", "p2p", "a2a"},
			[]string{"p2p", "all_gather", "a2a", "a2a+p2p", "p2p", "a2a"}},
		// A list shorter than the layers (which Validate refuses) gives
		// the last value to the layers beyond it.
		{"beyond the list is its last value", []string{"all_gather", "a2a"},
			[]string{"all_gather", "a2a", "a2a", "a2a", "a2a", "a2a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validTransformer()
			c.NumLayers, c.CPCommType = 6, tc.comm
			for i, w := range tc.want {
				if got := c.LayerCPCommType(i); got != w {
					t.Errorf("layer %d: %q, want %q", i, got, w)
				}
			}
		})
	}
}
