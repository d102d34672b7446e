package ckpt

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// fuzzScaler is the loss scaler's state stored in the checkpoints of FuzzLoad.
const fuzzScaler = `{"scale":1024,"growth_tracker":0,"hysteresis_tracker":2}`

// fuzzCheckpoint is sample(it) with the args and loss-scaler state of a mixed-precision run.
func fuzzCheckpoint(it int) *Checkpoint {
	c := sample(it)
	c.State.Args = map[string]any{"fp16": true, "lr": 0.001}
	c.State.GradScaler = json.RawMessage(fuzzScaler)
	return c
}

// FuzzLoad saves valid checkpoints of iterations 5 and 10, overwrites the state.json of
// iteration 10 with the fuzz input and the tracker file with another (if setTracker; else
// with the "10\n" Save wrote) and calls Load. Load must not panic; an error must be the
// only result and name the directory; on success the tracker must hold a valid iteration
// equal to State.Iteration, the tensors must be those saved for it, and iteration 5's
// untouched state must load unchanged.
func FuzzLoad(f *testing.F) {
	// Save (which syncs every file) runs once per process; every input then rewrites both
	// files it may change, and Load only reads, so inputs, which a process runs one at a
	// time, do not see each other's files.
	dir := f.TempDir()
	for _, it := range []int{5, 10} {
		if err := Save(dir, fuzzCheckpoint(it)); err != nil {
			f.Fatal(err)
		}
	}
	valid, err := os.ReadFile(filepath.Join(IterDir(dir, 10), "state.json"))
	if err != nil {
		f.Fatal(err)
	}
	if !bytes.Contains(valid, []byte(`"grad_scaler"`)) {
		f.Fatalf("the saved state.json has no grad_scaler:\n%s", valid)
	}
	states := [][]byte{
		valid,
		[]byte(`{"iteration":10,"consumed_train_samples":80,"optimizer_steps":10,"rng_state":[[1,2,3,10]],"grad_scaler":` + fuzzScaler + `}`),
		[]byte(`{"iteration":10}`),
		// Invalid JSON.
		nil,
		[]byte(`{`),
		valid[:len(valid)/2],
		[]byte(`{"iteration":10,}`),
		[]byte(`{"iteration":10} {}`),
		[]byte("\xff\xfe"),
		// Wrong types.
		[]byte(`null`),
		[]byte(`[]`),
		[]byte(`"state"`),
		[]byte(`{"iteration":"10"}`),
		[]byte(`{"iteration":10.5}`),
		[]byte(`{"iteration":10,"rng_state":"x"}`),
		[]byte(`{"iteration":10,"rng_state":[[1,2,3,4,5]]}`),
		[]byte(`{"iteration":10,"rng_state":[[-1,2,3,4]]}`),
		[]byte(`{"iteration":10,"args":[]}`),
		[]byte(`{"iteration":10,"grad_scaler":"x"}`),
		[]byte(`{"iteration":10,"grad_scaler":null}`),
		// Huge numbers.
		[]byte(`{"iteration":99999999999999999999}`),
		[]byte(`{"iteration":1e400}`),
		[]byte(`{"iteration":10,"consumed_train_samples":9223372036854775808}`),
		[]byte(`{"iteration":10,"rng_state":[[18446744073709551616,0,0,0]]}`),
		[]byte(`{"iteration":10,"grad_scaler":{"scale":1e400}}`),
		[]byte(`{"iteration":10,"args":{"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`),
		// Mismatching iterations.
		[]byte(`{"iteration":11}`),
		[]byte(`{"iteration":-1}`),
		[]byte(`{}`),
	}
	for _, s := range states {
		f.Add(s, []byte(nil), false)
	}
	for _, tr := range []string{"10\n", "10", " 10 \n", "010", "+10", "5\n", "-1", "abc", "", "\n", "7\n", "0", "99999999999999999999", "9223372036854775807", "1e1", "10\n5\n"} {
		f.Add(valid, []byte(tr), true)
	}
	f.Add([]byte(`{"iteration":11}`), []byte("11"), true)
	f.Add([]byte(`{"iteration":5}`), []byte("10"), true)

	f.Fuzz(func(t *testing.T, state, tracker []byte, setTracker bool) {
		if err := os.WriteFile(filepath.Join(IterDir(dir, 10), "state.json"), state, 0o644); err != nil {
			t.Fatal(err)
		}
		if !setTracker {
			tracker = []byte("10\n")
		}
		if err := os.WriteFile(filepath.Join(dir, TrackerFile), tracker, 0o644); err != nil {
			t.Fatal(err)
		}
		trackerText := string(tracker)

		c, err := Load(dir)
		if err != nil {
			if c != nil {
				t.Errorf("Load returned a checkpoint together with the error %v", err)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the directory %s", err, dir)
			}
			return
		}
		it, perr := strconv.Atoi(strings.TrimSpace(trackerText))
		if perr != nil || it < 0 {
			t.Fatalf("Load succeeded with the tracker %q, which holds no iteration", trackerText)
		}
		if c.State.Iteration != it {
			t.Fatalf("Load returned iteration %d, the tracker %q names %d", c.State.Iteration, trackerText, it)
		}
		if it != 5 && it != 10 {
			t.Fatalf("Load succeeded for iteration %d, which was never saved", it)
		}
		want := fuzzCheckpoint(it)
		if !sameTensors(c.Model, want.Model) || !sameTensors(c.Optimizer, want.Optimizer) {
			t.Errorf("iteration %d: tensors %v / %v, want %v / %v", it, c.Model, c.Optimizer, want.Model, want.Optimizer)
		}
		if it == 5 {
			got := c.State
			var gs bytes.Buffer
			if err := json.Compact(&gs, got.GradScaler); err != nil {
				t.Fatalf("iteration 5: grad_scaler %q: %v", got.GradScaler, err)
			}
			got.GradScaler = gs.Bytes()
			if !reflect.DeepEqual(got, want.State) {
				t.Errorf("iteration 5: state %+v, want %+v", got, want.State)
			}
		}
	})
}

// sameTensors reports whether a and b hold the same names, dtypes, shapes and bytes.
func sameTensors(a, b []safetensors.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].DType != b[i].DType ||
			!slices.Equal(a[i].Shape, b[i].Shape) || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}
