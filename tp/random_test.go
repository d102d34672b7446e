package tp

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/tensor/rng"
)

// draws returns the next n outputs of g.
func rngDraws(g *rng.RNG, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = g.Uint64()
	}
	return out
}

func wantErrText(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

func TestRNGTrackerAddErrors(t *testing.T) {
	tr := NewRNGStatesTracker()
	if tr.IsInitialized() {
		t.Fatal("a new tracker is initialised")
	}
	if err := tr.Add("a", 1); err != nil {
		t.Fatal(err)
	}
	if !tr.IsInitialized() {
		t.Fatal("Add did not mark the tracker initialised")
	}
	wantErrText(t, tr.Add("b", 1), "seed 1 already exists")
	wantErrText(t, tr.Add("a", 2), `rng state "a" already exists`)
	// Failed adds leave the tracker unchanged: "b" is absent, seed 2 is free.
	if got := tr.Names(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("names after failed adds %v, want [a]", got)
	}
	if err := tr.Add("c", 2); err != nil {
		t.Fatalf("seed 2 after a failed add: %v", err)
	}
}

func TestRNGTrackerUnknownName(t *testing.T) {
	tr := NewRNGStatesTracker()
	ran := false
	wantErrText(t, tr.Fork("x", func(*rng.RNG) error { ran = true; return nil }), `rng state "x" is not added`)
	if ran {
		t.Fatal("Fork ran its body for an unknown name")
	}
	_, err := tr.Get(ModelParallelRNG)
	wantErrText(t, err, `rng state "model-parallel-rng" is not added`)
}

func TestRNGTrackerForkStreams(t *testing.T) {
	tr := NewRNGStatesTracker()
	for name, seed := range map[string]uint64{"a": 10, "b": 20} {
		if err := tr.Add(name, seed); err != nil {
			t.Fatal(err)
		}
	}
	wantA, wantB := rngDraws(rng.New(10), 9), rngDraws(rng.New(20), 3)
	var gotA, gotB []uint64
	fork := func(name string, n int, dst *[]uint64, inner func() error) error {
		return tr.Fork(name, func(g *rng.RNG) error {
			*dst = append(*dst, rngDraws(g, n)...)
			if inner != nil {
				return inner()
			}
			return nil
		})
	}
	// Successive forks continue the stream; a fork of another name inside
	// does not disturb it; forks of the same name nest.
	if err := fork("a", 2, &gotA, nil); err != nil {
		t.Fatal(err)
	}
	if err := fork("a", 2, &gotA, func() error { return fork("b", 3, &gotB, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := fork("a", 2, &gotA, func() error {
		return fork("a", 2, &gotA, func() error { return fork("a", 1, &gotA, nil) })
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotA, wantA) || !slices.Equal(gotB, wantB) {
		t.Fatalf("streams a %v b %v, want %v %v", gotA, gotB, wantA, wantB)
	}
	// Fork returns the body's error.
	sentinel := errors.New("body failed")
	if err := tr.Fork("a", func(*rng.RNG) error { return sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("Fork returned %v, want the body's error", err)
	}
}

// TestRNGTrackerDoubleFork: two nested forks draw exactly what two
// successive forks of a second tracker draw (the reference's double-fork
// test).
func TestRNGTrackerDoubleFork(t *testing.T) {
	mk := func() *RNGStatesTracker {
		tr, _, err := ModelParallelManualSeed(77, 1, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	nested, single := mk(), mk()
	var a1, a2, b1, b2 []uint64
	if err := nested.Fork(ModelParallelRNG, func(g *rng.RNG) error {
		a1 = rngDraws(g, 5)
		return nested.Fork(ModelParallelRNG, func(g *rng.RNG) error { a2 = rngDraws(g, 5); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []*[]uint64{&b1, &b2} {
		if err := single.Fork(ModelParallelRNG, func(g *rng.RNG) error { *dst = rngDraws(g, 5); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(a1, b1) || !slices.Equal(a2, b2) || slices.Equal(a1, a2) {
		t.Fatalf("nested %v %v, successive %v %v", a1, a2, b1, b2)
	}
}

func TestRNGTrackerStatesRoundTrip(t *testing.T) {
	tr, _, err := ModelParallelManualSeed(5, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := tr.Get(ModelParallelRNG)
	if err != nil {
		t.Fatal(err)
	}
	rngDraws(g, 3)
	snap := tr.GetStates()
	first := rngDraws(g, 4)
	other := rngDraws(mustRNG(tr.Get(DataParallelRNG)), 2)
	// The copy is independent of later draws and of edits to the map.
	if snap[ModelParallelRNG] == g.State() {
		t.Fatal("GetStates returned live state, want a copy")
	}
	edited := tr.GetStates()
	delete(edited, DataParallelRNG)
	if len(tr.Names()) != 3 {
		t.Fatal("editing GetStates' map changed the tracker")
	}
	if err := tr.SetStates(snap); err != nil {
		t.Fatal(err)
	}
	// The generator handed out before SetStates replays: it is updated in place.
	if got := rngDraws(g, 4); !slices.Equal(got, first) {
		t.Fatalf("after SetStates the stream gives %v, want %v", got, first)
	}
	if got := rngDraws(mustRNG(tr.Get(DataParallelRNG)), 2); !slices.Equal(got, other) {
		t.Fatalf("data-parallel stream after SetStates %v, want %v", got, other)
	}
	// SetStates makes the keys the tracked names and marks a fresh tracker initialised.
	fresh := NewRNGStatesTracker()
	if err := fresh.SetStates(map[string]rng.State{"only": snap[ModelParallelRNG]}); err != nil {
		t.Fatal(err)
	}
	if !fresh.IsInitialized() || !slices.Equal(fresh.Names(), []string{"only"}) {
		t.Fatalf("after SetStates: initialised %v, names %v", fresh.IsInitialized(), fresh.Names())
	}
	if err := tr.SetStates(map[string]rng.State{"only": snap[ModelParallelRNG]}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.Names(), []string{"only"}) {
		t.Fatalf("SetStates kept names %v, want [only]", tr.Names())
	}
	wantErrText(t, tr.SetStates(map[string]rng.State{"z": {}}), "all zeros")
	if !slices.Equal(tr.Names(), []string{"only"}) {
		t.Fatal("a rejected SetStates changed the tracker")
	}
}

func TestRNGTrackerReset(t *testing.T) {
	tr, _, err := ModelParallelManualSeed(5, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr.Reset()
	if tr.IsInitialized() || len(tr.Names()) != 0 || len(tr.GetStates()) != 0 {
		t.Fatalf("after Reset: initialised %v, names %v", tr.IsInitialized(), tr.Names())
	}
	if err := tr.Add(DataParallelRNG, 5); err != nil {
		t.Fatalf("Reset kept the seeds: %v", err)
	}
}

func TestModelParallelManualSeed(t *testing.T) {
	tr, def, err := ModelParallelManualSeed(1234, 1, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{DataParallelRNG: 1234, ModelParallelRNG: 3953, ExpertParallelRNG: 2459}
	states := tr.GetStates()
	if len(states) != len(want) {
		t.Fatalf("streams %v, want %v", tr.Names(), want)
	}
	for name, seed := range want {
		if states[name] != rng.New(seed).State() {
			t.Errorf("%s does not start from seed %d", name, seed)
		}
	}
	if def.State() != rng.New(1234).State() {
		t.Error("the default generator does not start from the base seed")
	}
	// The default generator is separate from the data-parallel stream.
	rngDraws(def, 1)
	if tr.GetStates()[DataParallelRNG] != rng.New(1234).State() {
		t.Error("drawing from the default generator moved the data-parallel stream")
	}
	// 100·ep + etp = 1694 + tp makes the expert seed equal the model-parallel seed.
	_, _, err = ModelParallelManualSeed(1, 6, 17, 0)
	wantErrText(t, err, "already exists")
	_, _, err = ModelParallelManualSeed(1, -1, 0, 0)
	wantErrText(t, err, "non-negative")
}

func mustRNG(g *rng.RNG, err error) *rng.RNG {
	if err != nil {
		panic(err)
	}
	return g
}
