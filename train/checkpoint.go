package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
	"github.com/gotron/gotron/tp"
)

// Optimizer tensors are saved as exp_avg.NAME and exp_avg_sq.NAME.
const (
	expAvgPrefix   = "exp_avg."
	expAvgSqPrefix = "exp_avg_sq."
)

// saveCheckpoint is ckpt.Save; tests make it fail.
var saveCheckpoint = ckpt.Save

// save writes a checkpoint of the current iteration. The weights and
// Adam moments are gathered to whole tensors over the tensor-parallel group
// (so a checkpoint does not depend on the TP size it was written with) and
// the generator states of every rank are gathered; rank 0 writes, and its
// outcome is broadcast so that a failed save ends every rank with the same
// error.
func (t *trainer) save(ctx context.Context) error {
	w := t.groups.World
	mine := t.rngStates()
	all := make([]int64, len(mine)*w.Size())
	if err := w.AllGather(ctx, comm.I64(all), comm.I64(mine)); err != nil {
		return fmt.Errorf("save checkpoint: gathering generator states: %w", err)
	}
	if err := t.finishParamSync(ctx); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	// A 16-bit model saves its float32 main parameters: the values the
	// optimizer continues from (the model's are them rounded).
	weights := func(p *nn.Parameter) *tensor.Tensor { return p.Value }
	if t.mixedPrecision() {
		main, err := t.segmentTensors(ctx, mainOf)
		if err != nil {
			return fmt.Errorf("save checkpoint: %w", err)
		}
		weights = func(p *nn.Parameter) *tensor.Tensor { return main[0][p] }
	}
	model, err := t.wholeTensors(ctx, weights)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	expAvg, expAvgSq, err := t.moments(ctx)
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	var moments []safetensors.Tensor
	for _, m := range []struct {
		prefix string
		of     map[*nn.Parameter]*tensor.Tensor
	}{{expAvgPrefix, expAvg}, {expAvgSqPrefix, expAvgSq}} {
		ts, err := t.wholeTensors(ctx, func(p *nn.Parameter) *tensor.Tensor { return m.of[p] })
		if err != nil {
			return fmt.Errorf("save checkpoint: %w", err)
		}
		for _, x := range ts {
			x.Name = m.prefix + x.Name
			moments = append(moments, x)
		}
	}
	status := []int64{0}
	var saveErr error
	if w.Rank() == 0 {
		c := &ckpt.Checkpoint{
			State: ckpt.State{
				Iteration:       t.iteration,
				ConsumedSamples: int64(t.iteration) * int64(t.a.GlobalBatchSize),
				OptimizerSteps:  t.opt.Steps,
				Args:            argsRecord(t.a, w.Size()),
				GradScaler:      t.scalerState(),
			},
			Model:     model,
			Optimizer: moments,
		}
		for k := 0; k < len(all)/4; k++ {
			c.State.RNG = append(c.State.RNG, [4]uint64{uint64(all[4*k]), uint64(all[4*k+1]), uint64(all[4*k+2]), uint64(all[4*k+3])})
		}
		if saveErr = saveCheckpoint(t.a.Save, c); saveErr != nil {
			status[0] = 1
		}
	}
	if err := w.Broadcast(ctx, comm.I64(status), 0); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if saveErr != nil {
		return fmt.Errorf("%w (%s)", saveErr, previousCheckpoint(t.a.Save))
	}
	if status[0] != 0 {
		return fmt.Errorf("save checkpoint: rank 0 failed to write %s (see its error; %s)", t.a.Save, previousCheckpoint(t.a.Save))
	}
	return nil
}

// previousCheckpoint says what a failed save leaves in dir: the last
// complete checkpoint, or none.
func previousCheckpoint(dir string) string {
	if it, err := ckpt.Latest(dir); err == nil {
		return fmt.Sprintf("the checkpoint of iteration %d in %s is intact", it, dir)
	}
	return fmt.Sprintf("no earlier checkpoint was saved in %s", dir)
}

// rngStates returns the rank's generator states, flattened: the default
// stream, then the tracker's streams in name order (rngPerRank states).
func (t *trainer) rngStates() []int64 {
	states := []rng.State{t.rand.Default.State()}
	tracked := t.rand.Tracker.GetStates()
	for _, name := range t.rand.Tracker.Names() {
		states = append(states, tracked[name])
	}
	out := make([]int64, 0, 4*len(states))
	for _, s := range states {
		for _, x := range s {
			out = append(out, int64(x))
		}
	}
	return out
}

// setRNGStates restores what rngStates gave.
func (t *trainer) setRNGStates(states [][4]uint64) error {
	names := t.rand.Tracker.Names()
	if len(states) != 1+len(names) {
		return fmt.Errorf("%d generator states for %d streams", len(states), 1+len(names))
	}
	t.rand.Default.SetState(states[0])
	tracked := map[string]rng.State{}
	for i, name := range names {
		tracked[name] = states[1+i]
	}
	return t.rand.Tracker.SetStates(tracked)
}

// argsRecord is what a checkpoint records of the run's settings; resume
// refuses a checkpoint whose model differs.
func argsRecord(a Args, world int) map[string]any {
	m := a.Model
	return map[string]any{
		"num_layers": m.NumLayers, "hidden_size": m.HiddenSize, "num_attention_heads": m.NumAttentionHeads,
		"ffn_hidden_size": m.FFN(), "seq_length": m.SeqLength, "max_position_embeddings": m.MaxPositions(),
		"vocab_size": m.VocabSize, "global_batch_size": a.GlobalBatchSize, "world_size": world,
		"tensor_model_parallel_size":           max(m.TensorModelParallelSize, 1),
		"pipeline_model_parallel_size":         max(m.PipelineModelParallelSize, 1),
		"virtual_pipeline_model_parallel_size": m.NumModelChunks(),
	}
}

// checkedArgs are the settings a resumed run must share with its
// checkpoint: the model's shapes and head split, and the global batch
// (the data position continues from iteration·global batch).
var checkedArgs = []struct{ key, flag string }{
	{"num_layers", "--num-layers"}, {"hidden_size", "--hidden-size"}, {"num_attention_heads", "--num-attention-heads"},
	{"ffn_hidden_size", "--ffn-hidden-size"}, {"max_position_embeddings", "--max-position-embeddings"},
	{"vocab_size", "--vocab-size"}, {"global_batch_size", "--global-batch-size"},
}

// checkArgs compares the run's settings with a checkpoint's record
// (argsRecord's keys, as JSON numbers) and lists every difference.
func checkArgs(a Args, saved map[string]any) error {
	now := argsRecord(a, 1)
	var diffs []string
	for _, k := range checkedArgs {
		v, ok := saved[k.key].(float64)
		if !ok {
			continue // a checkpoint that did not record it
		}
		if want := now[k.key].(int); int(v) != want || v != math.Trunc(v) {
			diffs = append(diffs, fmt.Sprintf("%s %v in the checkpoint, %d in this run", k.flag, v, want))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("the checkpoint's settings differ from this run's: %s: pass the checkpoint's values", strings.Join(diffs, "; "))
}

// resume loads the latest checkpoint under --load into the model, the
// optimizer, the iteration count and the generators. Each rank keeps its
// tensor-parallel partition of the whole tensors the checkpoint holds.
//
// A --load directory that holds no checkpoint yet and is also --save
// starts the run from scratch (t.freshStart), as Megatron does; any other
// --load without a checkpoint is an error, so that a mistyped path does
// not silently train from random weights.
func (t *trainer) resume() error {
	c, err := ckpt.Load(t.a.Load)
	if errors.Is(err, ckpt.ErrNoCheckpoint) && t.a.Save != "" && filepath.Clean(t.a.Save) == filepath.Clean(t.a.Load) {
		t.freshStart = true
		return nil
	}
	if err != nil {
		return err
	}
	if err := checkArgs(t.a, c.State.Args); err != nil {
		return fmt.Errorf("--load %s (iteration %d): %w", t.a.Load, c.State.Iteration, err)
	}
	f := &safetensors.File{Name: t.a.Load, Tensors: c.Model}
	// A 16-bit model loads the saved weights as its float32 main
	// parameters and rounds them into the model.
	main := map[*nn.Parameter]*tensor.Tensor{}
	into := func(p *nn.Parameter) *tensor.Tensor { return p.Value }
	if t.mixedPrecision() {
		t.stateBuffers(main)
		into = func(p *nn.Parameter) *tensor.Tensor { return main[p] }
	}
	for _, ch := range t.chunks {
		if err := ch.LoadInto(f, fmt.Sprintf("--load %s (iteration %d)", t.a.Load, c.State.Iteration), "", into); err != nil {
			return err
		}
	}
	if t.mixedPrecision() {
		for p, m := range main {
			p.Value.CopyFrom(m)
		}
		t.setSegments([]segmentField{mainOf}, main)
	}
	if err := t.loadScaler(c.State.GradScaler); err != nil {
		return fmt.Errorf("--load %s: %w", t.a.Load, err)
	}
	opt := &safetensors.File{Name: t.a.Load, Tensors: c.Optimizer}
	expAvg, expAvgSq := map[*nn.Parameter]*tensor.Tensor{}, map[*nn.Parameter]*tensor.Tensor{}
	t.stateBuffers(expAvg, expAvgSq)
	for _, m := range []struct {
		prefix string
		into   map[*nn.Parameter]*tensor.Tensor
	}{{expAvgPrefix, expAvg}, {expAvgSqPrefix, expAvgSq}} {
		// LoadInto checks the moments of one prefix; the other prefix's
		// tensors are skipped by filtering the file.
		part := &safetensors.File{Name: opt.Name}
		for _, x := range opt.Tensors {
			if strings.HasPrefix(x.Name, m.prefix) {
				part.Tensors = append(part.Tensors, x)
			}
		}
		for _, ch := range t.chunks {
			if err := ch.LoadInto(part, fmt.Sprintf("--load %s: the optimizer state does not fit the model", t.a.Load), m.prefix,
				func(p *nn.Parameter) *tensor.Tensor { return m.into[p] }); err != nil {
				return err
			}
		}
	}
	t.setSegments([]segmentField{expAvgOf, expAvgSqOf}, expAvg, expAvgSq)
	t.iteration = c.State.Iteration
	t.opt.Steps = c.State.OptimizerSteps
	r, world := t.groups.Rank, t.groups.World.Size()
	per := len(t.rngStates()) / 4
	sameLayout := len(c.State.RNG) == per*world
	for _, x := range []struct {
		key string
		v   int
	}{{"tensor_model_parallel_size", t.tp.Size()}, {"pipeline_model_parallel_size", t.pp.Size()}, {"virtual_pipeline_model_parallel_size", t.a.Model.NumModelChunks()}} {
		saved := 1
		if v, ok := c.State.Args[x.key].(float64); ok {
			saved = int(v)
		}
		sameLayout = sameLayout && saved == x.v
	}
	if sameLayout {
		// The same layout: every rank continues its own streams.
		if err := t.setRNGStates(c.State.RNG[r*per : (r+1)*per]); err != nil {
			return fmt.Errorf("--load %s: %w", t.a.Load, err)
		}
	} else {
		// Another layout: the streams cannot continue exactly. Each
		// data-parallel replica starts fresh streams derived from the seed,
		// its replica and the iteration; the TP ranks of a replica share
		// the default one, as they must.
		base := rng.SplitMix64(t.seedBase() ^ uint64(t.iteration)*0x9E3779B97F4A7C15)
		tracker, def, err := tp.ModelParallelManualSeed(base, t.tp.Rank(), 0, 0)
		if err != nil {
			return err
		}
		t.rand.Default.SetState(def.State())
		if err := t.rand.Tracker.SetStates(tracker.GetStates()); err != nil {
			return err
		}
	}
	return nil
}
