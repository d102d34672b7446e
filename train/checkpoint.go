package train

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/models/gpt"
)

// Optimizer tensors are saved as exp_avg.NAME and exp_avg_sq.NAME.
const (
	expAvgPrefix   = "exp_avg."
	expAvgSqPrefix = "exp_avg_sq."
)

// save writes a checkpoint of the current iteration. Rank 0 writes it (every
// data-parallel replica holds the same weights and moments; the dropout
// generator states of all ranks are gathered first), and its outcome is
// broadcast so that a failed save ends every rank with the same error.
func (t *trainer) save(ctx context.Context) error {
	w := t.groups.World
	st := t.gen.State()
	mine := []int64{int64(st[0]), int64(st[1]), int64(st[2]), int64(st[3])}
	all := make([]int64, 4*w.Size())
	if err := w.AllGather(ctx, comm.I64(all), comm.I64(mine)); err != nil {
		return fmt.Errorf("save checkpoint: gathering generator states: %w", err)
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
			},
			Model: gpt.WeightTensors(t.model.Parameters()),
		}
		for r := 0; r < w.Size(); r++ {
			var s [4]uint64
			for k := range s {
				s[k] = uint64(all[4*r+k])
			}
			c.State.RNG = append(c.State.RNG, s)
		}
		for i, p := range t.opt.Params {
			c.Optimizer = append(c.Optimizer,
				safetensors.F32(expAvgPrefix+p.Name, p.Value.Shape(), t.opt.ExpAvg[i].Data()),
				safetensors.F32(expAvgSqPrefix+p.Name, p.Value.Shape(), t.opt.ExpAvgSq[i].Data()))
		}
		if saveErr = ckpt.Save(t.a.Save, c); saveErr != nil {
			status[0] = 1
		}
	}
	if err := w.Broadcast(ctx, comm.I64(status), 0); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if saveErr != nil {
		return fmt.Errorf("%w (the previous checkpoint in %s is intact)", saveErr, t.a.Save)
	}
	if status[0] != 0 {
		return fmt.Errorf("save checkpoint: rank 0 failed to write %s (see its error; the previous checkpoint is intact)", t.a.Save)
	}
	return nil
}

// argsRecord is what a checkpoint records of the run's settings; resume
// refuses a checkpoint whose model differs.
func argsRecord(a Args, world int) map[string]any {
	m := a.Model
	return map[string]any{
		"num_layers": m.NumLayers, "hidden_size": m.HiddenSize, "num_attention_heads": m.NumAttentionHeads,
		"ffn_hidden_size": m.FFN(), "seq_length": m.SeqLength, "max_position_embeddings": m.MaxPositions(),
		"vocab_size": m.VocabSize, "global_batch_size": a.GlobalBatchSize, "world_size": world,
	}
}

// resume loads the latest checkpoint under --load into the model, the
// optimizer, the iteration count and the generator.
func (t *trainer) resume() error {
	c, err := ckpt.Load(t.a.Load)
	if err != nil {
		return err
	}
	f := &safetensors.File{Name: t.a.Load, Tensors: c.Model}
	if err := gpt.LoadTensors(t.model.Parameters(), f, fmt.Sprintf("--load %s (iteration %d)", t.a.Load, c.State.Iteration)); err != nil {
		return err
	}
	opt := &safetensors.File{Name: t.a.Load, Tensors: c.Optimizer}
	want := map[string][]int{}
	for _, p := range t.opt.Params {
		want[expAvgPrefix+p.Name] = p.Value.Shape()
		want[expAvgSqPrefix+p.Name] = p.Value.Shape()
	}
	if err := opt.Check(want); err != nil {
		return fmt.Errorf("--load %s: the optimizer state does not fit the model: %w", t.a.Load, err)
	}
	for i, p := range t.opt.Params {
		for _, x := range []struct {
			prefix string
			dst    []float32
		}{{expAvgPrefix, t.opt.ExpAvg[i].Data()}, {expAvgSqPrefix, t.opt.ExpAvgSq[i].Data()}} {
			ts, _ := opt.Get(x.prefix + p.Name)
			v, err := ts.Float32()
			if err != nil {
				return fmt.Errorf("--load %s: %w", t.a.Load, err)
			}
			copy(x.dst, v)
		}
	}
	if gbs, ok := c.State.Args["global_batch_size"].(float64); ok && int(gbs) != t.a.GlobalBatchSize {
		return fmt.Errorf("--load %s: the checkpoint was trained with --global-batch-size %d, this run has %d: the data position would not continue; use the same global batch", t.a.Load, int(gbs), t.a.GlobalBatchSize)
	}
	t.iteration = c.State.Iteration
	t.opt.Steps = c.State.OptimizerSteps
	r := t.groups.Rank
	if r < len(c.State.RNG) && len(c.State.RNG) == t.groups.World.Size() {
		t.gen.SetState(c.State.RNG[r])
	} else if len(c.State.RNG) > 0 {
		// A different world size: dropout streams cannot continue exactly;
		// each rank continues from a fresh stream derived from the iteration.
		t.gen.Seed(c.State.RNG[0][0] ^ uint64(r) ^ uint64(c.State.Iteration))
	}
	return nil
}
