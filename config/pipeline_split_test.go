package config

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

const (
	fLayout = "pipeline_model_parallel_layout"
	fFirst  = "num_layers_in_first_pipeline_stage"
	fLast   = "num_layers_in_last_pipeline_stage"
	fAccE   = "account_for_embedding_in_pipeline_split"
	fAccL   = "account_for_loss_in_pipeline_split"
	fPerVP  = "num_layers_per_virtual_pipeline_stage"
	fPP     = "pipeline_model_parallel_size"
	fVPP    = "virtual_pipeline_model_parallel_size"
	fN      = "num_layers"
	fMTP    = "mtp_num_layers"
)

// TestPipelineSplitRules checks every pipeline-split rule of
// TransformerConfig.Validate: the fields each violation names and the
// arithmetic and fix in its message.
func TestPipelineSplitRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func() TransformerConfig
		want   [][]string
		msg    []string
	}{
		{"even split", func() TransformerConfig { return pipelined(8, 4, 0) }, nil, nil},
		{"even split, vpp", func() TransformerConfig { return pipelined(16, 4, 2) }, nil, nil},
		{"layout, vpp from the layout", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.PipelineModelParallelLayout = "E|t*3|(t|)*4t|L"
			return c
		}, nil, nil},
		{"the DeepSeek layout", func() TransformerConfig {
			c := pipelined(61, 16, 0)
			c.PipelineModelParallelLayout, c.MTPNumLayers, c.PositionEmbeddingType = "Et*3|(tt|)*29,m|L", 1, RoPE
			return c
		}, nil, nil},
		{"mtp with the loss", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.PipelineModelParallelLayout, c.MTPNumLayers, c.PositionEmbeddingType = "Et|tt|ttt|ttmmL", 2, RoPE
			return c
		}, nil, nil},
		{"mtp without a layout", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.MTPNumLayers, c.PositionEmbeddingType = 2, RoPE
			return c
		}, nil, nil},
		{"mtp with learned positions", func() TransformerConfig {
			c := pipelined(8, 1, 0)
			c.MTPNumLayers = 1
			return c
		}, [][]string{{fMTP, "position_embedding_type"}}, []string{"learned_absolute", "rope or none"}},
		{"mtp untied over pipeline stages", func() TransformerConfig {
			c := pipelined(8, 2, 0)
			c.MTPNumLayers, c.PositionEmbeddingType, c.ShareEmbeddingsAndOutputWeights = 1, RoPE, false
			return c
		}, nil, nil},
		{"mtp loss scale NaN", func() TransformerConfig {
			c := pipelined(8, 1, 0)
			c.MTPNumLayers, c.PositionEmbeddingType, c.MTPLossScalingFactor = 1, RoPE, math.NaN()
			return c
		}, [][]string{{"mtp_loss_scaling_factor"}}, []string{"finite number"}},

		// The layout.
		{"layout: invalid character", func() TransformerConfig {
			c := pipelined(8, 1, 0)
			c.PipelineModelParallelLayout = "Et*3|tt|x|L"
			return c
		}, [][]string{{fLayout}}, []string{
			`pipeline_model_parallel_layout "Et*3|tt|x|L": invalid layer character 'x' at position 9 (stage 2): use E (embedding), t (decoder), m (MTP), L (loss), | between stages`,
			"\n    Et*3|tt|x|L\n            ^"}},
		{"layout: stages not divisible by pp", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.PipelineModelParallelLayout = "Et|t|tt|tt|t|tL"
			return c
		}, [][]string{{fLayout, fPP}}, []string{"layout has 6 stages, not divisible by pipeline_model_parallel_size 4: use a multiple of 4 stages (4 or 8)"}},
		{"layout: decoder count", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.PipelineModelParallelLayout = "Et|tt|tt|ttL"
			return c
		}, [][]string{{fLayout, fN}}, []string{"layout has 7 decoder layers (t) but num_layers is 8"}},
		{"layout: every layer problem at once", func() TransformerConfig {
			c := pipelined(5, 3, 0)
			c.PipelineModelParallelLayout = "tt|tEm|t"
			return c
		}, [][]string{{fLayout}, {fLayout}, {fLayout, fN}, {fLayout, fMTP}, {fLayout}},
			[]string{"the first layer must be the embedding E"}},
		{"layout: vpp disagrees", func() TransformerConfig {
			c := pipelined(8, 4, 3)
			c.PipelineModelParallelLayout = "E|t*3|(t|)*4t|L"
			return c
		}, [][]string{{fLayout, fVPP, fPP}}, []string{"has 8 stages = pipeline_model_parallel_size 4 × 2 virtual stages, but virtual_pipeline_model_parallel_size is 3", "unset (0)", "4·3 = 12 stages"}},
		{"layout: vpp 1 agrees", func() TransformerConfig {
			c := pipelined(4, 4, 1)
			c.PipelineModelParallelLayout = "Et|t|t|tL"
			return c
		}, nil, nil},
		{"layout: vpp from the layout meets the pp=2 rule", func() TransformerConfig {
			c := pipelined(2, 2, 0)
			c.PipelineModelParallelLayout = "E|t|t|L"
			return c
		}, [][]string{{fVPP, fPP, "overlap_p2p_comm"}}, []string{"virtual_pipeline_model_parallel_size = 2"}},
		{"layout with uneven", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.PipelineModelParallelLayout, c.NumLayersInFirstPipelineStage = "E|t*3|(t|)*4t|L", 2
			return c
		}, [][]string{{fLayout, fFirst}}, []string{"cannot be set with other pipeline layout arguments (num_layers_in_first_pipeline_stage)", "drop --decoder-first-pipeline-num-layers"}},
		{"layout with account_for", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.PipelineModelParallelLayout = "E|t*3|(t|)*4t|L"
			c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = true, true
			return c
		}, [][]string{{fLayout, fAccE, fAccL}}, []string{"--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split"}},
		{"layout with num_layers_per_virtual_pipeline_stage", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.PipelineModelParallelLayout, c.NumLayersPerVirtualPipelineStage = "E|t*3|(t|)*4t|L", 1
			return c
		}, [][]string{{fLayout, fPerVP}}, []string{"--num-layers-per-virtual-pipeline-stage"}},

		// The even split.
		{"even: not divisible", func() TransformerConfig { return pipelined(6, 4, 0) },
			[][]string{{fN, fPP}}, []string{"num_layers 6 is not divisible by pipeline_model_parallel_size 4: use --num-layers 4 or 8, or --decoder-first-pipeline-num-layers/--decoder-last-pipeline-num-layers, or --pipeline-model-parallel-layout"}},
		{"even: fewer layers than ranks", func() TransformerConfig { return pipelined(3, 4, 0) },
			[][]string{{fN, fPP}}, []string{"use --num-layers 4,"}},
		{"even: layers per rank not divisible by vpp", func() TransformerConfig { return pipelined(8, 4, 4) },
			[][]string{{fN, fPP, fVPP}}, []string{"num_layers 8 / pipeline_model_parallel_size 4 = 2 layers per pipeline rank is not divisible by virtual_pipeline_model_parallel_size 4", "--num-layers 16", "a virtual_pipeline_model_parallel_size dividing 2 (1, 2)"}},
		{"account_for: not divisible", func() TransformerConfig {
			c := pipelined(6, 4, 0)
			c.AccountForEmbeddingInPipelineSplit = true
			return c
		}, [][]string{{fN, fPP, fAccE}}, []string{"num_layers 6 + 1 (embedding, account_for_embedding_in_pipeline_split) = 7 is not divisible by pipeline_model_parallel_size 4: use --num-layers 3 or 7, or --pipeline-model-parallel-layout"}},
		{"account_for both: divisible", func() TransformerConfig {
			c := pipelined(6, 4, 0)
			c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = true, true
			return c
		}, nil, nil},
		{"account_for with vpp: per rank not divisible", func() TransformerConfig {
			c := pipelined(10, 4, 2)
			c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = true, true
			return c
		}, [][]string{{fN, fPP, fVPP, fAccE, fAccL}}, []string{"= 12 / pipeline_model_parallel_size 4 = 3 layers per pipeline rank", "--num-layers 6 or 14"}},
		{"num_layers_per_virtual_pipeline_stage: valid", func() TransformerConfig {
			c := pipelined(16, 4, 0)
			c.NumLayersPerVirtualPipelineStage = 2
			return c
		}, nil, nil},
		{"num_layers_per_virtual_pipeline_stage: not a divisor", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.NumLayersPerVirtualPipelineStage = 3
			return c
		}, [][]string{{fN, fPP, fPerVP}}, []string{"num_layers_per_virtual_pipeline_stage 3 does not divide the num_layers 8 / pipeline_model_parallel_size 4 = 2 layers per pipeline rank: use a divisor of 2 (1, 2)"}},
		{"num_layers_per_virtual_pipeline_stage: disagrees with vpp", func() TransformerConfig {
			c := pipelined(16, 4, 4)
			c.NumLayersPerVirtualPipelineStage = 2
			return c
		}, [][]string{{fPerVP, fVPP}}, []string{"virtual_pipeline_model_parallel_size 4 disagrees with num_layers_per_virtual_pipeline_stage 2, which gives 4 / 2 = 2"}},
		{"num_layers_per_virtual_pipeline_stage: agrees with vpp", func() TransformerConfig {
			c := pipelined(16, 4, 2)
			c.NumLayersPerVirtualPipelineStage = 2
			return c
		}, nil, nil},
		{"num_layers_per_virtual_pipeline_stage with uneven", func() TransformerConfig {
			c := pipelined(9, 3, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersPerVirtualPipelineStage = 1, 1
			return c
		}, [][]string{{fPerVP, fFirst}}, []string{"--virtual-pipeline-model-parallel-size instead"}},

		// The uneven split.
		{"uneven: valid", func() TransformerConfig {
			c := pipelined(10, 4, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 1, 3
			return c
		}, nil, nil},
		{"uneven with account_for", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.NumLayersInFirstPipelineStage, c.AccountForLossInPipelineSplit = 2, true
			return c
		}, [][]string{{fFirst, fAccL}}, []string{"num_layers_in_first_pipeline_stage cannot be combined with account_for_loss_in_pipeline_split"}},
		{"uneven: negative", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.NumLayersInLastPipelineStage = -1
			return c
		}, [][]string{{fLast}}, []string{"num_layers_in_last_pipeline_stage = -1", "0 (unset)"}},
		{"uneven: first not divisible by vpp", func() TransformerConfig {
			c := pipelined(15, 4, 2)
			c.NumLayersInFirstPipelineStage = 3
			return c
		}, [][]string{{fFirst, fVPP}}, []string{"num_layers_in_first_pipeline_stage 3 is not divisible by virtual_pipeline_model_parallel_size 2 (3 mod 2 = 1)", "--decoder-first-pipeline-num-layers 2 or 4"}},
		{"uneven: last not divisible by vpp", func() TransformerConfig {
			c := pipelined(15, 4, 2)
			c.NumLayersInLastPipelineStage = 3
			return c
		}, [][]string{{fLast, fVPP}}, []string{"--decoder-last-pipeline-num-layers 2 or 4"}},
		{"uneven: both with pp 1", func() TransformerConfig {
			c := pipelined(8, 1, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 4, 4
			return c
		}, [][]string{{fFirst, fLast, fPP}}, []string{"pipeline_model_parallel_size is 1"}},
		{"uneven: more than num_layers", func() TransformerConfig {
			c := pipelined(4, 4, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 3, 3
			return c
		}, [][]string{{fN, fFirst, fLast}}, []string{"num_layers 4 − num_layers_in_first_pipeline_stage 3 − num_layers_in_last_pipeline_stage 3 = -2"}},
		{"uneven: layers left, no middle rank", func() TransformerConfig {
			c := pipelined(8, 2, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 3, 3
			return c
		}, [][]string{{fN, fPP, fFirst, fLast}}, []string{"= 2 layers remain but no middle pipeline stage"}},
		{"uneven: middle ranks left empty", func() TransformerConfig {
			c := pipelined(8, 3, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 4, 4
			return c
		}, [][]string{{fN, fPP, fFirst, fLast}}, []string{"= 0 layers remain for the 1 middle pipeline stages (pipeline_model_parallel_size 3 − 2)"}},
		{"uneven: middle not divisible", func() TransformerConfig {
			c := pipelined(10, 4, 0)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 1, 2
			return c
		}, [][]string{{fN, fPP, fFirst, fLast}}, []string{"= 7 middle layers are not divisible by the 2 middle pipeline stages (pipeline_model_parallel_size 4 − 2; 7 mod 2 = 1): use e.g. --decoder-first-pipeline-num-layers 2"}},
		{"uneven: middle rank not divisible by vpp", func() TransformerConfig {
			c := pipelined(14, 4, 2)
			c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 2, 2
			return c
		}, [][]string{{fN, fPP, fVPP, fFirst, fLast}}, []string{"each of the 2 middle pipeline ranks holds (num_layers 14 − num_layers_in_first_pipeline_stage 2 − num_layers_in_last_pipeline_stage 2) / 2 = 5 layers, not divisible by virtual_pipeline_model_parallel_size 2"}},
		{"negative num_layers_per_virtual_pipeline_stage", func() TransformerConfig {
			c := pipelined(8, 4, 0)
			c.NumLayersPerVirtualPipelineStage = -2
			return c
		}, [][]string{{fPerVP}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.config()
			err := c.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				return
			}
			checkViolations(t, asValidationError(t, err).Violations, tc.want, tc.msg)
		})
	}
}

// TestUnevenMiddleFixes checks that the suggested first-stage counts fix the
// middle split.
func TestUnevenMiddleFixes(t *testing.T) {
	c := pipelined(12, 4, 0)
	c.NumLayersInFirstPipelineStage = 4 // 8 middle layers over 3 ranks
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--decoder-first-pipeline-num-layers 3 or 6") {
		t.Fatalf("%v", err)
	}
	for _, f := range []int{3, 6} {
		c.NumLayersInFirstPipelineStage = f
		if err := c.Validate(); err != nil {
			t.Errorf("first %d: %v", f, err)
		}
	}
}

func TestResolvePipelineLayout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*TransformerConfig)
		vpp    int
	}{
		{"nothing to derive", func(c *TransformerConfig) {}, 0},
		{"layout with 2·pp stages", func(c *TransformerConfig) { c.PipelineModelParallelLayout = "E|t*3|(t|)*4t|L" }, 2},
		{"layout with pp stages", func(c *TransformerConfig) { c.PipelineModelParallelLayout = "Et|tt|ttt|ttL" }, 0},
		{"layout and a vpp already set", func(c *TransformerConfig) {
			c.PipelineModelParallelLayout, c.VirtualPipelineModelParallelSize = "E|t*3|(t|)*4t|L", 3
		}, 3},
		{"invalid layout", func(c *TransformerConfig) { c.PipelineModelParallelLayout = "E|t*3|(t|)*4x|L" }, 0},
		{"layout not divisible", func(c *TransformerConfig) { c.PipelineModelParallelLayout = "E|t*7|L" }, 0},
		{"layers per virtual stage 2", func(c *TransformerConfig) { c.NumLayersPerVirtualPipelineStage = 1 }, 2},
		{"layers per virtual stage = per rank", func(c *TransformerConfig) { c.NumLayersPerVirtualPipelineStage = 2 }, 0},
		{"layers per virtual stage, account for E and L", func(c *TransformerConfig) {
			c.NumLayers, c.AccountForEmbeddingInPipelineSplit, c.AccountForLossInPipelineSplit = 6, true, true
			c.NumLayersPerVirtualPipelineStage = 1
		}, 2},
		{"layers per virtual stage not a divisor", func(c *TransformerConfig) { c.NumLayersPerVirtualPipelineStage = 3 }, 0},
		{"layers per virtual stage with uneven", func(c *TransformerConfig) {
			c.NumLayersPerVirtualPipelineStage, c.NumLayersInFirstPipelineStage = 1, 2
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := pipelined(8, 4, 0)
			tc.change(&c)
			before := c
			r := c.ResolvePipelineLayout()
			if r.VirtualPipelineModelParallelSize != tc.vpp {
				t.Errorf("vpp %d, want %d", r.VirtualPipelineModelParallelSize, tc.vpp)
			}
			_ = c.Validate()
			if !reflect.DeepEqual(c, before) {
				t.Error("Validate or ResolvePipelineLayout modified the config")
			}
		})
	}
}
