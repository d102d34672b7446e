package tp

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gotron/gotron/tensor/rng"
)

// Names of the tracked random-number streams (docs/SEMANTICS.md § RNG streams
// and activation checkpointing).
const (
	// DataParallelRNG is the stream seeded with the base seed: the same on
	// every rank of a tensor-parallel group, for dropout outside
	// tensor-parallel regions.
	DataParallelRNG = "data-parallel-rng"
	// ModelParallelRNG is seeded with seed+2718+tp_rank: different on each
	// rank of a tensor-parallel group (and across data-parallel replicas
	// when, as gotron's trainer does, each replica passes its own base
	// seed), for dropout inside tensor-parallel regions.
	ModelParallelRNG = "model-parallel-rng"
	// ExpertParallelRNG is seeded with seed+1024+100·ep_rank+etp_rank, for
	// the expert layers of a mixture-of-experts model.
	ExpertParallelRNG = "expert-parallel-rng"
)

// RNGStatesTracker keeps named random-number streams (Megatron-Core's
// CudaRNGStatesTracker on gotron's xoshiro256** generator, package rng).
//
// Each name owns one *rng.RNG for the tracker's lifetime: [RNGStatesTracker.Get]
// hands that generator out, [RNGStatesTracker.Fork] runs a function with
// it, and draws advance the tracked stream wherever they are made. Because
// gotron passes generators explicitly (nn.Dropout(t, x, p, g)) there is no
// device-wide "current" generator to swap: forking a name gives the named
// generator to the body, and the caller's own generators are untouched, which
// is what the reference's fork achieves by saving and restoring the device
// state. [RNGStatesTracker.SetStates] updates the named generators in place,
// so a generator a model obtained from Get replays whatever state
// activation recompute restores.
//
// A tracker belongs to one rank and is not safe for concurrent use.
type RNGStatesTracker struct {
	gens        map[string]*rng.RNG
	seeds       map[uint64]bool
	initialized bool
}

// NewRNGStatesTracker returns an empty, uninitialised tracker.
func NewRNGStatesTracker() *RNGStatesTracker {
	tr := &RNGStatesTracker{}
	tr.Reset()
	return tr
}

// Reset forgets every stream and seed and marks the tracker uninitialised.
// Generators handed out by Get before the reset are no longer tracked.
func (tr *RNGStatesTracker) Reset() {
	tr.gens = map[string]*rng.RNG{}
	tr.seeds = map[uint64]bool{}
	tr.initialized = false
}

// IsInitialized reports whether Add or SetStates has been called since the
// tracker was made or reset.
func (tr *RNGStatesTracker) IsInitialized() bool { return tr.initialized }

// Add registers the stream name, starting from rng.New(seed), and marks
// the tracker initialised. Every stream needs its own seed and name: a seed
// already used gives the error "seed {seed} already exists", a name already
// added gives "rng state {name} already exists", and the tracker is then
// unchanged.
func (tr *RNGStatesTracker) Add(name string, seed uint64) error {
	tr.initialized = true
	if tr.seeds[seed] {
		return fmt.Errorf("tp: seed %d already exists: every tracked rng state needs its own seed", seed)
	}
	if _, ok := tr.gens[name]; ok {
		return fmt.Errorf("tp: rng state %q already exists: add each name once, or Reset the tracker first", name)
	}
	tr.seeds[seed] = true
	tr.gens[name] = rng.New(seed)
	return nil
}

// Get returns the generator of stream name, for a model that draws from the
// stream directly (dropout in a tensor-parallel region, say). The generator
// is the tracker's own: its draws advance the tracked state. An unknown name
// gives the error "rng state {name} is not added".
func (tr *RNGStatesTracker) Get(name string) (*rng.RNG, error) {
	g, ok := tr.gens[name]
	if !ok {
		return nil, fmt.Errorf("tp: rng state %q is not added: call Add(%q, seed) or ModelParallelManualSeed first", name, name)
	}
	return g, nil
}

// Fork runs fn with the generator of stream name and returns fn's error.
// The stream continues from where it was and keeps what fn draws (the
// reference's fork: switch to the named state, run the body, store the
// advanced state back). Forks nest: a fork of the same name inside fn
// continues the same stream, so two nested forks draw exactly what two
// successive forks would. An unknown name gives the error
// "rng state {name} is not added" and fn does not run.
func (tr *RNGStatesTracker) Fork(name string, fn func(g *rng.RNG) error) error {
	g, err := tr.Get(name)
	if err != nil {
		return err
	}
	return fn(g)
}

// Names returns the tracked stream names, sorted.
func (tr *RNGStatesTracker) Names() []string {
	return slices.Sorted(maps.Keys(tr.gens))
}

// GetStates returns a copy of every stream's current state, by name.
// Changing the map or drawing afterwards does not change the copy.
func (tr *RNGStatesTracker) GetStates() map[string]rng.State {
	states := make(map[string]rng.State, len(tr.gens))
	for name, g := range tr.gens {
		states[name] = g.State()
	}
	return states
}

// SetStates makes states the tracker's streams and marks it initialised:
// afterwards the tracked names are exactly the map's keys. A name already
// tracked keeps its generator, whose state is set in place (so generators
// handed out by Get follow); a new name gets a new generator. The seeds
// registered by Add are kept, as the reference keeps them. An all-zero
// state, which no generator can reach, is an error and leaves the tracker
// unchanged.
func (tr *RNGStatesTracker) SetStates(states map[string]rng.State) error {
	for name, s := range states {
		if s == (rng.State{}) {
			return fmt.Errorf("tp: SetStates: rng state %q is all zeros, which is invalid for xoshiro256**; pass states taken from GetStates", name)
		}
	}
	for name := range tr.gens {
		if _, ok := states[name]; !ok {
			delete(tr.gens, name)
		}
	}
	for name, s := range states {
		g, ok := tr.gens[name]
		if !ok {
			g = &rng.RNG{}
			tr.gens[name] = g
		}
		g.SetState(s)
	}
	tr.initialized = true
	return nil
}

// ModelParallelManualSeed builds a rank's random-number streams from the
// base seed (Megatron-Core's model_parallel_cuda_manual_seed,
// docs/SEMANTICS.md § RNG streams and activation checkpointing). It returns a
// tracker holding
//
//	DataParallelRNG      seed
//	ModelParallelRNG     seed + 2718 + tpRank
//	ExpertParallelRNG    seed + 1024 + 100·epRank + etpRank
//
// and the rank's default generator, rng.New(seed) (the process-wide
// generator of the reference, here a value the caller keeps). For example
// seed 1234 on tp rank 1, ep rank 2, etp rank 1 gives the seeds 1234, 3953
// and 2459. Negative ranks give an error, and so do ranks whose seeds
// collide (the formulas meet only when 100·epRank + etpRank = 1694 + tpRank).
func ModelParallelManualSeed(seed uint64, tpRank, epRank, etpRank int) (*RNGStatesTracker, *rng.RNG, error) {
	if tpRank < 0 || epRank < 0 || etpRank < 0 {
		return nil, nil, fmt.Errorf("tp: ModelParallelManualSeed: ranks must be non-negative, got tp %d, ep %d, etp %d", tpRank, epRank, etpRank)
	}
	tr := NewRNGStatesTracker()
	def := rng.New(seed)
	if err := tr.Add(DataParallelRNG, seed); err != nil {
		return nil, nil, err
	}
	if err := tr.Add(ModelParallelRNG, seed+2718+uint64(tpRank)); err != nil {
		return nil, nil, fmt.Errorf("tp: ModelParallelManualSeed(%d, tp %d): %w", seed, tpRank, err)
	}
	if err := tr.Add(ExpertParallelRNG, seed+1024+100*uint64(epRank)+uint64(etpRank)); err != nil {
		return nil, nil, fmt.Errorf("tp: ModelParallelManualSeed(%d, ep %d, etp %d): the expert seed collides with another stream's: %w", seed, epRank, etpRank, err)
	}
	return tr, def, nil
}
