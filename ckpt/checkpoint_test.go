package ckpt

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt/safetensors"
)

func sample(it int) *Checkpoint {
	return &Checkpoint{
		State: State{Iteration: it, ConsumedSamples: int64(it) * 8, OptimizerSteps: it, RNG: [][4]uint64{{1, 2, 3, uint64(it)}}},
		Model: []safetensors.Tensor{safetensors.F32("w", []int{2}, []float32{float32(it), 2})},
		Optimizer: []safetensors.Tensor{
			safetensors.F32("exp_avg.w", []int{2}, []float32{0.5, float32(it)}),
		},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, it := range []int{5, 10} {
		if err := Save(dir, sample(it)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := sample(10)
	if !reflect.DeepEqual(c.State, want.State) {
		t.Errorf("state %+v, want %+v", c.State, want.State)
	}
	got, _ := c.Model[0].Float32()
	if !reflect.DeepEqual(got, []float32{10, 2}) {
		t.Errorf("model %v", got)
	}
	if _, err := os.Stat(IterDir(dir, 5)); err != nil {
		t.Errorf("the earlier iteration is gone: %v", err)
	}
}

// TestFailedSaveKeepsPreviousCheckpoint aborts a save at every stage and
// checks that the previous checkpoint still loads unchanged and nothing
// temporary is left behind.
func TestFailedSaveKeepsPreviousCheckpoint(t *testing.T) {
	for _, stage := range []string{"model", "optimizer", "state", "rename", "tracker"} {
		t.Run(stage, func(t *testing.T) {
			dir := t.TempDir()
			if err := Save(dir, sample(5)); err != nil {
				t.Fatal(err)
			}
			boom := errors.New("disk full")
			err := save(dir, sample(10), func(s string) error {
				if s == stage {
					return boom
				}
				return nil
			})
			if !errors.Is(err, boom) {
				t.Fatalf("save returned %v, want the injected failure", err)
			}
			c, err := Load(dir)
			if err != nil {
				t.Fatalf("the previous checkpoint does not load: %v", err)
			}
			if c.State.Iteration != 5 {
				t.Fatalf("loaded iteration %d, want 5", c.State.Iteration)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temporary %s left behind", e.Name())
				}
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "holds no gotron checkpoint") {
		t.Errorf("empty dir: %v", err)
	}
	if err := Save(dir, sample(3)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, TrackerFile), []byte("three\n"), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not an iteration number") {
		t.Errorf("damaged tracker: %v", err)
	}
	os.WriteFile(filepath.Join(dir, TrackerFile), []byte("3\n"), 0o644)
	model := filepath.Join(IterDir(dir, 3), "model.safetensors")
	b, _ := os.ReadFile(model)
	os.WriteFile(model, b[:len(b)-3], 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated model: %v", err)
	}
}
