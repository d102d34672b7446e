package config

import (
	"strings"
	"testing"
)

// TestAllViolationsReportedTogether breaks several independent rules of both
// configs at once and checks that one error reports every one of them.
func TestAllViolationsReportedTogether(t *testing.T) {
	mp := DefaultModelParallelConfig()
	mp.SequenceParallel = true              // rule 1: tp = 1
	mp.PipelineModelParallelSize = 2        // rule 4: no pipeline_dtype
	mp.VirtualPipelineModelParallelSize = 2 // pp = 2 without overlap
	mp.FP16, mp.BF16 = true, true           // both precisions
	mp.UseTERNGTracker = true               // not provided
	ddp := DefaultDDPConfig()
	ddp.NumDistributedOptimizerInstances = 2 // without DistOpt
	ddp.NumBuckets, ddp.BucketSize = 2, 10   // both
	ddp.AverageInCollective = true           // with per-token loss

	want := [][]string{
		{"sequence_parallel", "tensor_model_parallel_size"},
		{"pipeline_dtype", "pipeline_model_parallel_size"},
		{"virtual_pipeline_model_parallel_size", "pipeline_model_parallel_size", "overlap_p2p_comm"},
		{"fp16", "bf16"},
		{"use_te_rng_tracker"},
		{"num_distributed_optimizer_instances", "use_distributed_optimizer"},
		{"num_buckets", "bucket_size"},
		{"calculate_per_token_loss", "average_in_collective"},
	}
	err := ValidateTogether(mp, ddp, true)
	ve := asValidationError(t, err)
	checkViolations(t, ve.Violations, want, nil)

	// One line per violation after the header.
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want)+1 {
		t.Fatalf("Error() has %d lines, want %d:\n%s", len(lines), len(want)+1, err)
	}
	if lines[0] != "config: 8 invalid settings:" {
		t.Errorf("header %q", lines[0])
	}
	for i, v := range ve.Violations {
		if lines[i+1] != "  - "+v.Msg {
			t.Errorf("line %d = %q, want the violation %q", i+1, lines[i+1], v.Msg)
		}
	}

	// The model-parallel part alone reports its five.
	if n := len(asValidationError(t, mp.Validate()).Violations); n != 5 {
		t.Errorf("mp.Validate() has %d violations, want 5", n)
	}
}

func TestValidationErrorHelpers(t *testing.T) {
	if NewValidationError(nil) != nil {
		t.Errorf("NewValidationError(nil) != nil")
	}
	err := NewValidationError([]Violation{
		{Fields: []string{"a", "b"}, Msg: "first"},
		{Fields: []string{"b", "c"}, Msg: "second"},
	})
	ve := asValidationError(t, err)
	if got := strings.Join(ve.Fields(), ","); got != "a,b,c" {
		t.Errorf("Fields() = %s", got)
	}
	if !ve.Violations[0].Names("b", "a") || ve.Violations[0].Names("c") {
		t.Errorf("Names is wrong")
	}
	one := &ValidationError{Violations: []Violation{{Fields: []string{"x"}, Msg: "only"}}}
	if one.Error() != "config: 1 invalid setting:\n  - only" {
		t.Errorf("Error() = %q", one.Error())
	}
}
