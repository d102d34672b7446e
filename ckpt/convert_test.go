package ckpt

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// fillAll reads every tensor of r whole, as float32 bits.
func fillAll(t *testing.T, r *Reader) map[string][]uint32 {
	t.Helper()
	out := map[string][]uint32{}
	for key, shape := range r.Manifest.Tensors {
		b := Box{Offset: make([]int, len(shape)), Shape: shape}
		d := make([]float32, b.Numel())
		if err := r.Fill(key, b, d); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		bits := make([]uint32, len(d))
		for i, v := range d {
			bits[i] = math.Float32bits(v)
		}
		out[key] = bits
	}
	return out
}

// sameManifest compares everything but the shards (which a conversion
// lays out anew).
func sameManifest(t *testing.T, got, want *Manifest) {
	t.Helper()
	g, w := *got, *want
	g.Shards, w.Shards = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Errorf("manifest\n%+v\nwant\n%+v", g, w)
	}
}

// TestWholeRoundTrip converts a two-rank distributed checkpoint to the
// whole-tensor form and back, directly and through Save and Load (whose
// JSON turns the arguments into float64): every tensor reads back
// bit-identical, and the state, arguments, layout and generator states
// are the original's.
func TestWholeRoundTrip(t *testing.T) {
	_, r := openRich(t)
	orig := fillAll(t, r)
	c, err := ToWhole(r)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range c.Model {
		names = append(names, x.Name)
	}
	for _, x := range c.Optimizer {
		names = append(names, x.Name)
	}
	if want := []string{"b", "big", "e", "s", "w", "exp_avg.b", "exp_avg.w", "exp_avg_sq.b", "exp_avg_sq.w"}; !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	big, _ := c.Model[1].Float32()
	if want := richValues("model/big", []int{600, 1000}); !slices.Equal(big, want) {
		t.Fatal("big's values differ")
	}
	st := c.State
	if st.Iteration != 4 || st.ConsumedSamples != 32 || st.OptimizerSteps != 3 || string(st.GradScaler) != string(r.Manifest.GradScaler) ||
		st.Args["tensor_model_parallel_size"] != 2 || len(st.Args) != 5 {
		t.Errorf("state %+v", st)
	}
	if want := [][4]uint64{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, math.MaxUint64}}; !reflect.DeepEqual(st.RNG, want) {
		t.Errorf("RNG %v, want %v", st.RNG, want)
	}

	check := func(name string, c *Checkpoint, layout Layout) {
		t.Helper()
		dir := t.TempDir()
		if err := FromWhole(dir, c, layout); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := Open(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer back.Close()
		if len(back.Manifest.Shards) != 1 || back.Manifest.Shards[0].File != ShardFile(0) {
			t.Errorf("%s: shards %+v", name, back.Manifest.Shards)
		}
		if _, err := back.Verify(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		sameManifest(t, back.Manifest, r.Manifest)
		if got := fillAll(t, back); !reflect.DeepEqual(got, orig) {
			t.Errorf("%s: the tensors differ", name)
		}
	}
	check("direct", c, r.Manifest.Layout)

	wd := t.TempDir()
	if err := Save(wd, c); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(wd)
	if err != nil {
		t.Fatal(err)
	}
	if l := WholeLayout(loaded.State); l != richLayout {
		t.Errorf("WholeLayout %+v, want %+v", l, richLayout)
	}
	check("through Save and Load", loaded, WholeLayout(loaded.State))
}

// TestFromWholeRanks: generator states that the layout's world divides
// are split into ranks with their coordinates; others all go to rank 0.
func TestFromWholeRanks(t *testing.T) {
	s := func(n int) [][4]uint64 {
		out := make([][4]uint64, n)
		for i := range out {
			out[i] = [4]uint64{uint64(i), 1, 2, 3}
		}
		return out
	}
	// World 8 = tp 2 · dp 2 · pp 2: rank = tp + 2·(dp + 2·pp).
	got := splitRanks(s(16), Layout{World: 8, TP: 2, PP: 2, DP: 2})
	if len(got) != 8 {
		t.Fatalf("%d ranks", len(got))
	}
	for r, rs := range got {
		if rs.Rank != r || rs.TP != r%2 || rs.DP != r/2%2 || rs.PP != r/4 || len(rs.RNG) != 2 || rs.RNG[0][0] != uint64(2*r) {
			t.Errorf("rank %d: %+v", r, rs)
		}
	}
	for _, c := range []struct {
		n int
		l Layout
	}{{3, Layout{World: 2}}, {3, Layout{}}} {
		got := splitRanks(s(c.n), c.l)
		if len(got) != 1 || got[0].Rank != 0 || len(got[0].RNG) != c.n {
			t.Errorf("%d states, layout %+v: %+v", c.n, c.l, got)
		}
	}
	if got := splitRanks(nil, Layout{}); got != nil {
		t.Errorf("no states: %+v", got)
	}
}

// TestFromWholeRefuses: what the distributed form cannot hold is refused
// before anything is installed.
func TestFromWholeRefuses(t *testing.T) {
	ok := func() *Checkpoint {
		return &Checkpoint{
			State:     State{Iteration: 2, OptimizerSteps: 2, Args: map[string]any{"num_layers": float64(2)}},
			Model:     []safetensors.Tensor{safetensors.F32("w", []int{2}, []float32{1, 2})},
			Optimizer: []safetensors.Tensor{safetensors.F32("exp_avg.w", []int{2}, []float32{1, 2})},
		}
	}
	for name, c := range map[string]struct {
		mod  func(*Checkpoint)
		want string
	}{
		"optimizer name":  {func(c *Checkpoint) { c.Optimizer[0].Name = "momentum.w" }, `tensor "momentum.w"`},
		"bare prefix":     {func(c *Checkpoint) { c.Optimizer[0].Name = "exp_avg." }, `tensor "exp_avg."`},
		"duplicate":       {func(c *Checkpoint) { c.Model = append(c.Model, c.Model[0]) }, `"w" twice`},
		"float argument":  {func(c *Checkpoint) { c.State.Args["lr"] = 0.001 }, `argument "lr" is 0.001`},
		"bool argument":   {func(c *Checkpoint) { c.State.Args["fp16"] = true }, `argument "fp16" is true`},
		"invalid state":   {func(c *Checkpoint) { c.State.OptimizerSteps = 3 }, "optimizer_steps 3"},
		"incomplete data": {func(c *Checkpoint) { c.Model[0].Data = c.Model[0].Data[:4] }, "tensor w"},
	} {
		dir := t.TempDir()
		cp := ok()
		c.mod(cp)
		err := FromWhole(dir, cp, Layout{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", name, err, dir, c.want)
		}
		if _, err := Latest(dir); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("%s: something was installed: %v", name, err)
		}
	}
	dir := t.TempDir()
	if err := FromWhole(dir, ok(), Layout{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Manifest.Args.Ints["num_layers"] != 2 || !r.Has("optimizer/exp_avg/w") || r.Has("optimizer/exp_avg_sq/w") {
		t.Errorf("manifest %+v", r.Manifest)
	}
}
