package train

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
	"github.com/gotron/gotron/tp"
)

// resume loads the latest checkpoint under --load into the model, the
// optimizer, the iteration count and the generators, whatever layout saved
// it: each rank reads the boxes of the whole tensors its partitions and
// optimizer segments cover, and only the checksum blocks around them.
//
// A --load directory that holds no checkpoint yet and is also --save
// starts the run from scratch (t.freshStart), as Megatron does; any other
// --load without a checkpoint is an error, so that a mistyped path does
// not silently train from random weights.
func (t *trainer) resume() error {
	r, err := openCheckpoint(t.a)
	if errors.Is(err, ckpt.ErrNoCheckpoint) && t.a.Save != "" && filepath.Clean(t.a.Save) == filepath.Clean(t.a.Load) {
		if !t.a.Model.PerformInitialization {
			return fmt.Errorf("--load %s holds no checkpoint yet, and --no-initialization drew no weights: the model would train from zeros; drop --no-initialization for the first run", t.a.Load)
		}
		t.freshStart = true
		return nil
	}
	if err != nil {
		return err
	}
	defer r.Close()
	m := r.Manifest
	t.loadedFrom = loadedDir(r)
	where := loadWhere(t.a, r)
	loadOptim := !t.a.NoLoadOptim && !t.a.Finetune
	if err := t.checkCheckpoint(r, loadOptim); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := t.loadWeights(r); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if t.a.Finetune {
		// The weights only: iteration 0, fresh optimizer and generators.
		return nil
	}
	t.iteration, t.consumed = m.Iteration, m.ConsumedSamples
	if t.consumed == 0 {
		// A state without the count (a hand-made state.json): a
		// constant batch.
		t.consumed = int64(m.Iteration) * int64(t.a.GlobalBatchSize)
	}
	if !loadOptim {
		return t.resumeRNG(m)
	}
	if err := t.loadMoments(r); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := t.loadScaler(m.GradScaler); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	t.opt.Adam().Steps, t.lrSamples = m.OptimizerSteps, m.SchedulerSamples
	if t.lrSamples == 0 {
		// A checkpoint that predates the field: a constant batch, this
		// run's (checkArgs made it the checkpoint's where recorded).
		t.lrSamples = int64(m.OptimizerSteps) * int64(t.a.GlobalBatchSize)
	}
	return t.resumeRNG(m)
}

// checkCheckpoint refuses a checkpoint that cannot fill this run: other
// arguments, a parameter or buffer it lacks (or the optimizer state, when
// it is to be loaded), or weights this run's model does not have.
func (t *trainer) checkCheckpoint(r *ckpt.Reader, loadOptim bool) error {
	if err := checkArgs(t.a, r.Manifest.Args); err != nil {
		return err
	}
	whole, buffers := gpt.ParameterShapes(t.a.Model), gpt.BufferShapes(t.a.Model)
	fields := t.keyFields()
	for name := range whole {
		for _, k := range fields {
			if !r.Has(k.prefix+name) && (k.prefix == ckpt.ModelKey || loadOptim) {
				hint := "it was saved from another model"
				if k.prefix != ckpt.ModelKey {
					hint = "it was saved without the optimizer state (--no-save-optim): pass --no-load-optim or --finetune"
				}
				return fmt.Errorf("the checkpoint has no %s%s: %s", k.prefix, name, hint)
			}
		}
	}
	for name := range buffers {
		if !r.Has(ckpt.ModelKey + name) {
			return fmt.Errorf("the checkpoint has no %s%s: it was saved from another model (without --moe-router-enable-expert-bias?)", ckpt.ModelKey, name)
		}
	}
	var extra []string
	for key := range r.Manifest.Tensors {
		if name, ok := strings.CutPrefix(key, ckpt.ModelKey); ok && whole[name] == nil && buffers[name] == nil {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("the checkpoint holds weights this run's model does not have (%s): it was saved from another model, or its record of the model options is damaged: pass that model's options", strings.Join(extra, ", "))
	}
	return nil
}

// loadWeights reads the weights: every rank its whole partition of every
// parameter (the model needs all of it; with 16-bit parameters they are
// rounded into the model and the float32 values kept as main parameters),
// and the expert biases.
func (t *trainer) loadWeights(r *ckpt.Reader) error {
	whole := gpt.ParameterShapes(t.a.Model)
	values := map[*nn.Parameter]*tensor.Tensor{}
	owner := map[*nn.Parameter]dp.Wrapper{}
	for _, w := range t.allDDPs() {
		for _, p := range w.Parameters() {
			owner[p] = w
		}
	}
	for _, p := range t.params {
		buf := make([]float32, p.Value.Len())
		if err := r.Load(t.sharded(ckpt.ModelKey+p.Name, p, whole[p.Name], 0, buf)); err != nil {
			return err
		}
		values[p] = tensor.FromSlice(buf, p.Value.Shape()...)
		if w := owner[p]; w != nil {
			w.SetParam(p, values[p])
		} else {
			p.Value.CopyFrom(values[p])
		}
	}
	if t.mixedPrecision() {
		t.setSegments([]segmentField{mainOf}, values)
	}
	for _, c := range t.chunks {
		for name, v := range c.ExpertBiases() {
			if err := r.Fill(ckpt.ModelKey+name, ckpt.Box{Offset: []int{0}, Shape: []int{len(v)}}, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadMoments reads the optimizer's state (Adam's moments, SGD's momentum
// buffer): each optimizer segment its own range.
func (t *trainer) loadMoments(r *ckpt.Reader) error {
	whole := gpt.ParameterShapes(t.a.Model)
	segs, state := t.opt.Adam().Segments, t.keyFields()[1:]
	for i := range segs {
		s := &segs[i]
		p := s.Param
		for _, k := range state {
			if err := r.Load(t.sharded(k.prefix+p.Name, p, whole[p.Name], s.Offset, k.field(s))); err != nil {
				return err
			}
		}
	}
	return nil
}

// openCheckpoint opens --load's latest iteration, or --ckpt-step's; its
// errors name the flag.
func openCheckpoint(a Args) (*ckpt.Reader, error) {
	var r *ckpt.Reader
	var err error
	np := a.NonPersistentDir(a.Load)
	newer := false
	if a.CkptStep == 0 && a.nonPersistent() {
		if newer, err = newerIn(np, a.Load); err != nil {
			return nil, fmt.Errorf("--load's non-persistent checkpoints: %w", err)
		}
	}
	switch {
	case a.CkptStep > 0: // (a step names an iteration of --load itself)
		r, err = ckpt.OpenIteration(a.Load, a.CkptStep)
	case newer:
		if r, err = ckpt.Open(np); err != nil {
			return nil, fmt.Errorf("--load's non-persistent checkpoint %w: remove %s to resume from --load's own checkpoints (or pass --ckpt-step with one of their iterations)", err, np)
		}
		return r, nil
	default:
		r, err = ckpt.Open(a.Load)
	}
	if err != nil {
		return nil, fmt.Errorf("--load %w", err)
	}
	return r, nil
}

// newerIn reports whether directory np holds a checkpoint at least as
// new as dir's (Megatron loads the non-persistent one then): false when
// np holds none, an error when its tracker is damaged (rather than a
// silent start from dir's older checkpoint, or from scratch).
func newerIn(np, dir string) (bool, error) {
	n, err := ckpt.Latest(np)
	switch {
	case errors.Is(err, ckpt.ErrNoCheckpoint):
		return false, nil
	case err != nil:
		return false, err
	}
	p, err := ckpt.Latest(dir)
	return err != nil || n >= p, nil
}

// resumeRNG restores the generators. The streams are keyed by the rank's
// coordinates (TP rank, pipeline rank, data-parallel replica): with the
// tensor- and pipeline-parallel sizes and the model chunks of the run that
// saved (and the checkpoint holding the streams, and no --no-load-rng),
// each rank continues the streams of the rank at its coordinates, whatever
// the data-parallel size or the optimizer; a replica the saving run did
// not have, or any rank after a change of TP, PP or VPP (the streams then
// cover other parts of the model), starts fresh streams derived from the
// seed, its replica and the iteration, the TP ranks of a replica sharing
// the default one, as they must.
func (t *trainer) resumeRNG(m *ckpt.Manifest) error {
	l, now := m.Layout, t.layout()
	per := len(t.rngStates()) / 4
	if !t.a.NoLoadRNG && l.TP == now.TP && l.PP == now.PP && l.VPP == now.VPP && l.ContextParallel() == now.ContextParallel() {
		for _, rs := range m.Ranks {
			if rs.TP == t.tp.Rank() && rs.PP == t.pp.Rank() && rs.DP == t.dpg.Rank() && len(rs.RNG) == per {
				if err := t.setRNGStates(rs.RNG); err != nil {
					return fmt.Errorf("--load %s: %w", t.a.Load, err)
				}
				return nil
			}
		}
	}
	base := rng.SplitMix64(t.seedBase() ^ uint64(t.iteration)*0x9E3779B97F4A7C15)
	tracker, def, err := tp.ModelParallelManualSeed(base, t.tp.Rank(), 0, 0)
	if err != nil {
		return err
	}
	t.rand.Default.SetState(def.State())
	return t.rand.Tracker.SetStates(tracker.GetStates())
}
