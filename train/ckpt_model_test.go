package train

import (
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/config"
)

// TestOldCheckpointKeepsEpsilon: a checkpoint older than the model record
// (no "model" in its args) was saved with any --layernorm-epsilon, so its
// epsilon is not compared and --use-checkpoint-args keeps the run's; a
// new record always lists the epsilon, and a record of an invalid model
// is refused as damaged.
func TestOldCheckpointKeepsEpsilon(t *testing.T) {
	a := tpArgs(1, 1)
	a.Model.LayernormEpsilon = 1e-3
	old := ckpt.Args{Ints: argsRecord(a, 1).Ints}
	if err := compareArgs(a, old, false); err != nil {
		t.Errorf("an old checkpoint with this run's shape: %v", err)
	}
	m := a.Model
	if err := applyModelRecord(&m, old.Model); err != nil || m.LayernormEpsilon != 1e-3 {
		t.Errorf("--use-checkpoint-args on an old checkpoint: epsilon %g (%v), want the run's 0.001", m.LayernormEpsilon, err)
	}
	rec := argsRecord(a, 1)
	if rec.Model["layernorm_epsilon"] != "0.001" {
		t.Errorf("the record lists layernorm_epsilon as %q, want 0.001", rec.Model["layernorm_epsilon"])
	}
	b := a
	b.Model.LayernormEpsilon = 1e-5
	if err := compareArgs(b, rec, false); err == nil || !strings.Contains(err.Error(), "--norm-epsilon 0.001 in the checkpoint, 1e-05 in this run") {
		t.Errorf("a new checkpoint with another epsilon: %v", err)
	}
	m = config.DefaultTransformerConfig()
	if err := applyModelRecord(&m, map[string]string{"kv_channels": "-5"}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a record of kv_channels -5: %v, want a damaged-manifest error", err)
	}
}
