package ckpt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// TrackerFile names the file holding the latest saved iteration.
const TrackerFile = "latest_checkpointed_iteration.txt"

// State is the non-tensor part of a checkpoint.
type State struct {
	// Iteration is the number of completed training iterations.
	Iteration int `json:"iteration"`
	// ConsumedSamples is the samples the iterations consumed
	// (Iteration·global batch size without a batch-size ramp): the data
	// position.
	ConsumedSamples int64 `json:"consumed_train_samples"`
	// OptimizerSteps is Adam's step count (for bias correction).
	OptimizerSteps int `json:"optimizer_steps"`
	// SchedulerSamples is the samples of the optimizer steps taken: the
	// learning-rate schedule's position when it counts samples (0 in
	// checkpoints that predate it: OptimizerSteps·global batch size).
	SchedulerSamples int64 `json:"scheduler_samples,omitempty"`
	// RNG is the rank's generator state (dropout), one entry per rank.
	RNG [][4]uint64 `json:"rng_state"`
	// Args records the settings the run was started with, for checks on
	// resume: integers, and under "model" the model options that differ
	// from their defaults, as text (see Args).
	Args map[string]any `json:"args,omitempty"`
	// GradScaler is the loss scaler's state of a mixed-precision run with
	// loss scaling (optim.ScalerState's JSON: scale, growth_tracker,
	// hysteresis_tracker), absent otherwise.
	GradScaler json.RawMessage `json:"grad_scaler,omitempty"`
}

// Checkpoint is everything saved for one iteration.
type Checkpoint struct {
	State     State
	Model     []safetensors.Tensor
	Optimizer []safetensors.Tensor
}

// IterDir returns the directory of iteration it under dir.
func IterDir(dir string, it int) string {
	return filepath.Join(dir, fmt.Sprintf("iter_%07d", it))
}

// Save writes c under dir as iteration c.State.Iteration and points the
// tracker at it.
func Save(dir string, c *Checkpoint) error { return save(dir, c, nil) }

// save is Save with a fault hook for tests: fail(stage) is called before
// each stage and a non-nil result aborts the save there.
func save(dir string, c *Checkpoint, fail func(stage string) error) error {
	if fail == nil {
		fail = func(string) error { return nil }
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save checkpoint: --save %s: %w", dir, err)
	}
	final := IterDir(dir, c.State.Iteration)
	// What a save killed mid-way (SIGKILL, power loss) left behind.
	RemoveStale(dir)
	tmp, err := os.MkdirTemp(dir, filepath.Base(final)+tmpMarker)
	if err != nil {
		return fmt.Errorf("save checkpoint: --save %s is not writable: %w", dir, err)
	}
	// MkdirTemp creates 0700; a checkpoint is shared like any output.
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("save checkpoint: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := fail("model"); err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(tmp, "model.safetensors"), c.Model, map[string]string{"format": "gotron"}); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := fail("optimizer"); err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(tmp, "optimizer.safetensors"), c.Optimizer, map[string]string{"format": "gotron"}); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	js, err := json.MarshalIndent(c.State, "", "  ")
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := fail("state"); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(tmp, "state.json"), append(js, '\n')); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := install(dir, tmp, c.State.Iteration, fail); err != nil {
		return err
	}
	ok = true
	return nil
}

// install syncs the complete iteration directory tmp, renames it into
// place as iteration it under dir (replacing an older save of the same
// iteration only once the new one is complete) and points the tracker at
// it (write, sync, rename). fail is save's fault hook. On an error before
// the rename, tmp is left for the caller to remove.
func install(dir, tmp string, it int, fail func(string) error) error {
	final := IterDir(dir, it)
	if err := syncDir(tmp); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := fail("rename"); err != nil {
		return err
	}
	old := ""
	if _, err := os.Stat(final); err == nil {
		old = final + ".old"
		os.RemoveAll(old)
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("save checkpoint: %w", err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		if old != "" {
			os.Rename(old, final)
		}
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if old != "" {
		os.RemoveAll(old)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := fail("tracker"); err != nil {
		return err
	}
	tracker := filepath.Join(dir, TrackerFile)
	tt, err := os.CreateTemp(dir, TrackerFile+tmpMarker)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if err := tt.Chmod(0o644); err != nil {
		tt.Close()
		os.Remove(tt.Name())
		return fmt.Errorf("save checkpoint: tracker: %w", err)
	}
	_, werr := tt.WriteString(strconv.Itoa(it) + "\n")
	serr := tt.Sync()
	cerr := tt.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tt.Name())
		return fmt.Errorf("save checkpoint: tracker: %w", err)
	}
	if err := os.Rename(tt.Name(), tracker); err != nil {
		os.Remove(tt.Name())
		return fmt.Errorf("save checkpoint: tracker: %w", err)
	}
	return syncDir(dir)
}

// TempDir returns the temporary directory of iteration it's save under
// dir, named by a nonce the saving ranks agree on.
func TempDir(dir string, it int, nonce uint64) string {
	return fmt.Sprintf("%s%s%016x", IterDir(dir, it), tmpMarker, nonce)
}

// BeginSave prepares a distributed save of iteration it into dir: it
// creates dir, removes what interrupted saves left, and creates the
// temporary iteration directory (TempDir) every rank writes its shard
// into. One rank calls it, before the others write.
func BeginSave(dir string, it int, nonce uint64) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("save checkpoint: --save %s: %w", dir, err)
	}
	RemoveStale(dir)
	tmp := TempDir(dir, it, nonce)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", fmt.Errorf("save checkpoint: --save %s is not writable: %w", dir, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // whatever the umask
		os.RemoveAll(tmp)
		return "", fmt.Errorf("save checkpoint: %w", err)
	}
	return tmp, nil
}

// RemoveTemp removes the temporary directory of a save that failed.
func RemoveTemp(tmp string) { os.RemoveAll(tmp) }

// Commit completes a distributed save: it writes the manifest m (whose
// shards every rank has written into tmp), and installs tmp as iteration
// m.Iteration. On an error tmp is removed and the previous checkpoint and
// tracker stay as they were.
func Commit(dir, tmp string, m *Manifest) error { return commit(dir, tmp, m, nil) }

// commit is Commit with save's fault hook.
func commit(dir, tmp string, m *Manifest, fail func(string) error) error {
	if fail == nil {
		fail = func(string) error { return nil }
	}
	m.Format = Format
	err := m.validate()
	if err == nil {
		err = fail("manifest")
	}
	if err == nil {
		err = writeManifest(tmp, m)
	}
	if err != nil {
		err = fmt.Errorf("save checkpoint: %w", err)
	} else {
		err = install(dir, tmp, m.Iteration, fail)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return err
}

// tmpMarker separates an iteration directory's or the tracker's name from
// the random suffix of its temporary copy during a save.
const tmpMarker = ".tmp-"

// ErrNoCheckpoint is wrapped by Latest and Load for a directory that holds
// no checkpoint at all: missing, empty, or holding only what interrupted
// saves left (a run with the same --save and --load starts from scratch).
var ErrNoCheckpoint = errors.New("holds no gotron checkpoint")

// RemoveStale deletes the temporary directories and tracker files that
// saves killed mid-way left under dir (NAME.tmp-*). It is called at the
// start of every save, when no other save into dir runs.
func RemoveStale(dir string) {
	for _, p := range Stale(dir) {
		os.RemoveAll(p)
	}
}

// RemoveOlder deletes the iteration directories under dir older than
// keep (the newest, installed; the tracker names it): a directory of
// non-persistent checkpoints keeps one. Temporary directories of saves
// in flight are not touched.
func RemoveOlder(dir string, keep int) error {
	iters, _ := filepath.Glob(filepath.Join(dir, "iter_[0-9]*"))
	for _, p := range iters {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "iter_"))
		if err != nil || n >= keep {
			continue // a temporary directory (iter_N.tmp-…), or the one kept
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("removing the older checkpoint %s: %w", p, err)
		}
	}
	return nil
}

// Stale returns what saves killed mid-way left under dir: temporary
// iteration directories and tracker files (NAME.tmp-*), which the next
// save removes.
func Stale(dir string) []string {
	stale, _ := filepath.Glob(filepath.Join(dir, "iter_*"+tmpMarker+"*"))
	trackers, _ := filepath.Glob(filepath.Join(dir, TrackerFile+tmpMarker+"*"))
	return append(stale, trackers...)
}

// Latest returns the iteration named by dir's tracker file. A directory
// that is missing or holds no iteration directory gives an error wrapping
// ErrNoCheckpoint; one with iterations but no tracker is an error that
// says how to choose one.
func Latest(dir string) (int, error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return 0, fmt.Errorf("%s is a file, not a checkpoint directory: pass the directory given to --save (the one holding %s and the iter_* directories)", dir, TrackerFile)
	}
	b, err := os.ReadFile(filepath.Join(dir, TrackerFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			iters, _ := filepath.Glob(filepath.Join(dir, "iter_[0-9]*"))
			iters = slices.DeleteFunc(iters, func(p string) bool { return strings.Contains(filepath.Base(p), tmpMarker) })
			if len(iters) > 0 {
				return 0, fmt.Errorf("%s: the directory holds %d iteration director(ies) (the last %s) but no %s: write the iteration to resume from into %s",
					dir, len(iters), filepath.Base(iters[len(iters)-1]), TrackerFile, filepath.Join(dir, TrackerFile))
			}
			return 0, fmt.Errorf("%s %w (no %s, no iter_* directory): pass the directory given to --save", dir, ErrNoCheckpoint, TrackerFile)
		}
		return 0, fmt.Errorf("%s: %w", dir, err)
	}
	it, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || it < 0 {
		return 0, fmt.Errorf("%s: %s holds %q, not an iteration number: the file is damaged; write the iteration to resume from into it", dir, TrackerFile, strings.TrimSpace(string(b)))
	}
	return it, nil
}

// Load reads the latest checkpoint under dir.
func Load(dir string) (*Checkpoint, error) {
	it, err := Latest(dir)
	if err != nil {
		return nil, err
	}
	d := IterDir(dir, it)
	c := &Checkpoint{}
	js, err := os.ReadFile(filepath.Join(d, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("%s: iteration %d: %w", dir, it, err)
	}
	if err := json.Unmarshal(js, &c.State); err != nil {
		return nil, fmt.Errorf("%s: %s is damaged: %v", dir, filepath.Join(d, "state.json"), err)
	}
	if c.State.Iteration != it {
		return nil, fmt.Errorf("%s: the tracker names iteration %d but %s records %d", dir, it, filepath.Join(d, "state.json"), c.State.Iteration)
	}
	if err := c.State.validate(); err != nil {
		return nil, fmt.Errorf("%s: %s is damaged: %v", dir, filepath.Join(d, "state.json"), err)
	}
	m, err := safetensors.ReadFile(filepath.Join(d, "model.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	o, err := safetensors.ReadFile(filepath.Join(d, "optimizer.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	c.Model, c.Optimizer = m.Tensors, o.Tensors
	return c, nil
}

// validate checks the values no training state can have.
func (s State) validate() error {
	switch {
	case s.Iteration < 0:
		return fmt.Errorf("iteration %d is negative", s.Iteration)
	case s.ConsumedSamples < 0:
		return fmt.Errorf("consumed_train_samples %d is negative", s.ConsumedSamples)
	case s.OptimizerSteps < 0 || s.OptimizerSteps > s.Iteration:
		return fmt.Errorf("optimizer_steps %d is outside [0, iteration %d]", s.OptimizerSteps, s.Iteration)
	case s.SchedulerSamples < 0 || s.SchedulerSamples > s.ConsumedSamples:
		return fmt.Errorf("scheduler_samples %d is outside [0, consumed_train_samples %d]", s.SchedulerSamples, s.ConsumedSamples)
	}
	return nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	return errors.Join(werr, f.Sync(), f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
