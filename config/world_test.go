package config

import (
	"strings"
	"testing"
)

// TestDataParallelSize checks dp against a count of the dense grid: the
// number of distinct (tp, cp, pp) coordinate triples fills world/dp ranks.
func TestDataParallelSize(t *testing.T) {
	for _, tc := range []struct{ world, tp, pp, cp, want int }{
		{16, 2, 2, 1, 4}, // docs/SEMANTICS.md § Rank groups, the first example
		{16, 2, 2, 2, 2}, // the CP example
		{1, 1, 1, 1, 1},
		{24, 3, 2, 4, 1},
	} {
		c := DefaultModelParallelConfig()
		c.TensorModelParallelSize, c.PipelineModelParallelSize, c.ContextParallelSize = tc.tp, tc.pp, tc.cp
		got, err := c.DataParallelSize(tc.world)
		if err != nil || got != tc.want {
			t.Errorf("world %d tp %d pp %d cp %d: DataParallelSize = %d, %v; want %d", tc.world, tc.tp, tc.pp, tc.cp, got, err, tc.want)
		}
	}

	c := DefaultModelParallelConfig()
	c.TensorModelParallelSize, c.PipelineModelParallelSize, c.ContextParallelSize = 2, 2, 2
	_, err := c.DataParallelSize(12)
	ve := asValidationError(t, err)
	checkViolations(t, ve.Violations,
		[][]string{{"world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"}},
		[]string{"world_size 12", "2·2·2 = 8", "12 mod 8 = 4", "multiple of 8"})

	if _, err := c.DataParallelSize(0); err == nil {
		t.Errorf("DataParallelSize(0) succeeded")
	}
}

func TestExpertDataParallelSize(t *testing.T) {
	for _, tc := range []struct{ world, tp, etp, ep, pp, want int }{
		{16, 2, 0, 2, 2, 2}, // § Rank groups: ep=2, etp=tp=2 → edp = 16/(2·2·2)
		{16, 2, 1, 4, 2, 2}, // § Rank groups: ep=4, etp=1 → edp = 2
		{8, 1, 0, 8, 1, 1},
	} {
		c := DefaultModelParallelConfig()
		c.TensorModelParallelSize, c.ExpertTensorParallelSize = tc.tp, tc.etp
		c.ExpertModelParallelSize, c.PipelineModelParallelSize = tc.ep, tc.pp
		got, err := c.ExpertDataParallelSize(tc.world)
		if err != nil || got != tc.want {
			t.Errorf("%+v: ExpertDataParallelSize = %d, %v; want %d", tc, got, err, tc.want)
		}
	}

	c := DefaultModelParallelConfig()
	c.TensorModelParallelSize, c.ExpertModelParallelSize, c.PipelineModelParallelSize = 2, 3, 2
	_, err := c.ExpertDataParallelSize(16)
	checkViolations(t, asValidationError(t, err).Violations,
		[][]string{{"world_size", "expert_tensor_parallel_size", "expert_model_parallel_size", "pipeline_model_parallel_size"}},
		[]string{"2·3·2 = 12", "16 mod 12 = 4"})

	if _, err := c.ExpertDataParallelSize(-1); err == nil {
		t.Errorf("ExpertDataParallelSize(-1) succeeded")
	}
}

func TestValidateWorld(t *testing.T) {
	distopt := func(n int) DDPConfig {
		d := DefaultDDPConfig()
		d.UseDistributedOptimizer, d.NumDistributedOptimizerInstances = true, n
		return d
	}
	mp := func(tp, pp, cp, ep int) ModelParallelConfig {
		c := DefaultModelParallelConfig()
		c.TensorModelParallelSize, c.PipelineModelParallelSize = tp, pp
		c.ContextParallelSize, c.ExpertModelParallelSize = cp, ep
		return c
	}

	t.Run("valid", func(t *testing.T) {
		// dp·cp = 4·1, edp = 16/(2·1·2) = 4: both divisible by 2.
		if err := ValidateWorld(16, mp(2, 2, 1, 1), distopt(2)); err != nil {
			t.Fatal(err)
		}
		// dp = 4/(1·1·2) = 2 is not a multiple of 4, but dp·cp = 4 is (the
		// rule is over the dp×cp group); edp = 4/(1·1·1) = 4.
		if err := ValidateWorld(4, mp(1, 1, 2, 1), distopt(4)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("dense grid does not divide", func(t *testing.T) {
		err := ValidateWorld(10, mp(2, 2, 1, 1), DefaultDDPConfig())
		ve := asValidationError(t, err)
		// Both grids are tp·pp = 4 here; both are reported.
		checkViolations(t, ve.Violations, [][]string{
			{"world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"},
			{"world_size", "expert_tensor_parallel_size", "expert_model_parallel_size", "pipeline_model_parallel_size"},
		}, []string{"10 mod 4 = 2"})
	})
	t.Run("dp·cp not divisible by instances", func(t *testing.T) {
		// dp = 16/(2·2·1) = 4, dp·cp = 4; edp = 16/(2·1·2) = 4; instances 3.
		err := ValidateWorld(16, mp(2, 2, 1, 1), distopt(3))
		checkViolations(t, asValidationError(t, err).Violations, [][]string{
			{"num_distributed_optimizer_instances", "context_parallel_size"},
			{"num_distributed_optimizer_instances", "expert_tensor_parallel_size", "expert_model_parallel_size"},
		}, []string{"4·1 = 4", "4 mod 3 = 1"})
	})
	t.Run("edp alone not divisible by instances", func(t *testing.T) {
		// dp = 16/(1·1·2) = 8, dp·cp = 16; edp = 16/(1·4·1) = 4; instances 8.
		err := ValidateWorld(16, mp(1, 1, 2, 4), distopt(8))
		checkViolations(t, asValidationError(t, err).Violations, [][]string{
			{"num_distributed_optimizer_instances", "expert_tensor_parallel_size", "expert_model_parallel_size"},
		}, []string{"16/(1·4·1) = 4", "4 mod 8 = 4"})
	})
	t.Run("world below 1", func(t *testing.T) {
		err := ValidateWorld(0, mp(1, 1, 1, 1), DefaultDDPConfig())
		checkViolations(t, asValidationError(t, err).Violations, [][]string{{"world_size"}}, []string{"= 0"})
	})
	t.Run("sizes whose product wraps around", func(t *testing.T) {
		// 2³²·2³² is 0 in an int, and dividing by it panics; 7·0x6db6db6db6db6db7
		// is 1 in an int (the inverse of 7 modulo 2⁶⁴), which divides every
		// world; 3·(2⁶²+1) is negative. The last wraps in the expert grid
		// only: etp = tp = 2³¹ times ep = 2³³.
		for _, c := range []ModelParallelConfig{
			mp(1<<32, 1<<32, 1, 1), mp(7, 0x6db6db6db6db6db7, 1, 1), mp(3, 1<<62+1, 1, 1), mp(1<<31, 1, 1, 1<<33),
		} {
			err := ValidateWorld(4, c, DefaultDDPConfig())
			if err == nil || !strings.Contains(err.Error(), "a product beyond any number of ranks") {
				t.Errorf("ValidateWorld(4) with tp %d, pp %d, cp %d, ep %d: %v", c.TensorModelParallelSize, c.PipelineModelParallelSize,
					c.ContextParallelSize, c.ExpertModelParallelSize, err)
			}
			if _, err := c.DataParallelSize(4); err == nil {
				t.Errorf("DataParallelSize(4) with tp %d, pp %d, cp %d succeeded", c.TensorModelParallelSize, c.PipelineModelParallelSize, c.ContextParallelSize)
			}
		}
		// Just within the world.
		if dp, err := mp(2, 2, 2, 1).DataParallelSize(8); err != nil || dp != 1 {
			t.Errorf("DataParallelSize(8) with tp = pp = cp = 2: %d, %v; want 1", dp, err)
		}
	})
	t.Run("invalid sizes", func(t *testing.T) {
		err := ValidateWorld(8, mp(0, 1, 1, 1), DefaultDDPConfig())
		if err == nil || !strings.Contains(err.Error(), "tensor_model_parallel_size = 0") {
			t.Fatalf("ValidateWorld with tp = 0: %v", err)
		}
	})
}

// TestValidateMicrobatches checks the interleaved-schedule rules that need
// the number of microbatches against a direct enumeration of the schedule
// table's groups (docs/SEMANTICS.md § Interleaved schedule table): groups
// start at 0, G, 2G, ...; the last group takes the rest. The schedule is
// valid when P ≤ G ≤ M and no group holds fewer than P microbatches.
func TestValidateMicrobatches(t *testing.T) {
	for p := 3; p <= 5; p++ {
		for g := 1; g <= 9; g++ {
			for m := 1; m <= 30; m++ {
				c := DefaultModelParallelConfig()
				c.VirtualPipelineModelParallelSize, c.MicrobatchGroupSizePerVPStage = 2, g
				withPP(&c, p)
				want := g >= p && g <= m
				if want {
					for s := 0; s < m; s += g {
						size := g
						if s+g >= m { // last group
							size = m - s
						}
						if size < p {
							want = false
						}
					}
				}
				err := c.ValidateMicrobatches(m)
				if (err == nil) != want {
					t.Fatalf("p %d g %d m %d: ValidateMicrobatches = %v, want valid = %v", p, g, m, err, want)
				}
			}
		}
	}

	c := DefaultModelParallelConfig()
	c.VirtualPipelineModelParallelSize = 2
	withPP(&c, 4)
	err := c.ValidateMicrobatches(10)
	checkViolations(t, asValidationError(t, err).Violations,
		[][]string{{"num_microbatches", "microbatch_group_size_per_vp_stage", "pipeline_model_parallel_size"}},
		[]string{"10 mod 4 = 2"})
	err = c.ValidateMicrobatches(3)
	checkViolations(t, asValidationError(t, err).Violations,
		[][]string{{"microbatch_group_size_per_vp_stage", "pipeline_model_parallel_size", "num_microbatches"}},
		[]string{"[4, 3]"})
	err = c.ValidateMicrobatches(0)
	checkViolations(t, asValidationError(t, err).Violations, [][]string{{"num_microbatches"}}, []string{"= 0"})

	// Without the interleaved schedule any M ≥ 1 is fine.
	c.VirtualPipelineModelParallelSize = 0
	if err := c.ValidateMicrobatches(3); err != nil {
		t.Errorf("non-interleaved: %v", err)
	}
}
