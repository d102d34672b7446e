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
	if _, err := Load(dir); err == nil || !errors.Is(err, ErrNoCheckpoint) {
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

// TestNoCheckpointIsDistinguished: a missing or empty directory, or one
// holding only an interrupted save's leftovers, wraps ErrNoCheckpoint; one
// whose iterations lost their tracker is another error naming the last
// iteration.
func TestNoCheckpointIsDistinguished(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Join(dir, "missing"), dir} {
		if _, err := Load(d); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("%s: %v, want ErrNoCheckpoint", d, err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "iter_0000004.tmp-123"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("only a leftover temporary: %v, want ErrNoCheckpoint", err)
	}
	if err := Save(dir, sample(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "iter_0000004.tmp-123")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the save left an interrupted save's directory in place: %v", err)
	}
	os.Remove(filepath.Join(dir, TrackerFile))
	_, err := Load(dir)
	if err == nil || errors.Is(err, ErrNoCheckpoint) || !strings.Contains(err.Error(), "iter_0000003") {
		t.Errorf("iterations without a tracker: %v, want an error naming iter_0000003", err)
	}
}

// TestCheckpointModes: the iteration directory is 0755 and the tracker
// 0644, not MkdirTemp's and CreateTemp's private 0700 and 0600; files
// written with os.Create keep 0666 less the umask.
func TestCheckpointModes(t *testing.T) {
	dir := t.TempDir()
	if err := Save(dir, sample(3)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{IterDir(dir, 3), 0o755}, {filepath.Join(dir, TrackerFile), 0o644}} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, got, c.mode)
		}
	}
}

// TestDamagedStateRefused: values no run can have (the issue's
// optimizer_steps -1 panicked in the optimizer) are refused by Load.
func TestDamagedStateRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*State)
		want string
	}{
		{"negative steps", func(s *State) { s.OptimizerSteps = -1 }, "optimizer_steps -1"},
		{"steps beyond iterations", func(s *State) { s.OptimizerSteps = 99 }, "optimizer_steps 99"},
		{"negative samples", func(s *State) { s.ConsumedSamples = -8 }, "consumed_train_samples -8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cp := sample(3)
			c.set(&cp.State)
			if err := Save(dir, cp); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "state.json is damaged") {
				t.Errorf("got %v, want an error naming %q", err, c.want)
			}
		})
	}
}
