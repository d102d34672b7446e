package train

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/nn"
)

// keyField pairs a checkpoint key prefix with the optimizer segment's
// array it saves.
type keyField struct {
	prefix string
	field  segmentField
}

// keyFields are the checkpoint's tensors of each parameter under its
// Megatron name: the float32 (main) weights, then the optimizer's state —
// Adam's two moments, or SGD's momentum buffer (none without momentum).
func (t *trainer) keyFields() []keyField {
	out := []keyField{{ckpt.ModelKey, mainOf}}
	switch {
	case t.a.Optimizer != "sgd":
		out = append(out, keyField{ckpt.ExpAvgKey, expAvgOf}, keyField{ckpt.ExpAvgSqKey, expAvgSqOf})
	case t.a.SGDMomentum != 0:
		out = append(out, keyField{ckpt.MomentumKey, momentumOf})
	}
	return out
}

// save writes a distributed checkpoint of the current iteration: every
// rank writes, in parallel, the pieces of the tensors it owns into its own
// shard, and rank 0 writes the manifest and installs the iteration. With
// async, save returns once the pieces are copied and the shards are being
// written in the background (--async-save); finishSave installs the
// iteration later. A save first completes the one still in flight.
//
// Ownership follows the reference's: the float32 (main) weights and the
// Adam moments of each parameter come from the optimizer's segments
// (each rank's distributed-optimizer shard, or the whole parameter
// without it) of the first data-parallel replica, or of every data-parallel
// rank of the first optimizer instance under the distributed optimizer;
// tensors replicated over tensor parallelism from TP rank 0; the word
// embedding once, from the first pipeline stage. Every piece is a box of
// the whole tensor (ckpt.Regions), so any layout can read it back.
func (t *trainer) save(ctx context.Context, async bool) error {
	if err := t.finishSave(ctx, true); err != nil {
		return err
	}
	m, err := t.manifest(ctx)
	if err != nil {
		return err
	}
	if err := t.saver.Begin(ctx, t.iteration, m); err != nil {
		return err
	}
	it, err := t.saver.Write(ctx, t.checkpointPieces(), async)
	if err == nil && it > 0 && t.onSaved != nil {
		t.onSaved(it)
	}
	return err
}

// saveNonPersistent writes a non-persistent checkpoint of the current
// iteration into Args.NonPersistentDir (its own saver; synchronously),
// then removes that directory's older iterations: only the newest is kept
// (Megatron's cleanup_old_non_persistent_checkpoint), and a --load that
// sees it resumes from it when it is the newer.
func (t *trainer) saveNonPersistent(ctx context.Context) error {
	if err := t.finishSave(ctx, true); err != nil {
		return err
	}
	if t.npSaver == nil {
		s := *t.saver
		s.Dir = t.a.NonPersistentDir(t.a.Save)
		t.npSaver = &s
	}
	m, err := t.manifest(ctx)
	if err != nil {
		return err
	}
	if err := t.npSaver.Begin(ctx, t.iteration, m); err != nil {
		return err
	}
	if _, err := t.npSaver.Write(ctx, t.checkpointPieces(), false); err != nil {
		return err
	}
	if t.groups.World.Rank() == 0 {
		if err := ckpt.RemoveOlder(t.npSaver.Dir, t.iteration); err != nil {
			return fmt.Errorf("--non-persistent-save-interval: %w", err)
		}
	}
	return nil
}

// manifest does the trainer's collective part of a save, before any
// shard is written: the parameters' last all-gather, the generator states
// and coordinates of every rank; rank 0 records them, with the run's state
// and arguments and every tensor's whole shape, in the manifest it
// returns (the other ranks return nil).
func (t *trainer) manifest(ctx context.Context) (*ckpt.Manifest, error) {
	w := t.groups.World
	if err := t.finishParamSync(ctx); err != nil {
		return nil, fmt.Errorf("save checkpoint: %w", err)
	}
	mine := t.rngStates()
	all := make([]int64, len(mine)*w.Size())
	if err := w.AllGather(ctx, comm.I64(all), comm.I64(mine)); err != nil {
		return nil, fmt.Errorf("save checkpoint: gathering generator states: %w", err)
	}
	coords := []int64{int64(t.tp.Rank()), int64(t.pp.Rank()), int64(t.dpg.Rank())}
	allCoords := make([]int64, 3*w.Size())
	if err := w.AllGather(ctx, comm.I64(allCoords), comm.I64(coords)); err != nil {
		return nil, fmt.Errorf("save checkpoint: gathering the layout: %w", err)
	}

	if w.Rank() != 0 {
		return nil, nil
	}
	m := &ckpt.Manifest{
		Iteration: t.iteration, ConsumedSamples: t.consumed, OptimizerSteps: t.opt.Adam().Steps, SchedulerSamples: t.lrSamples,
		Args: argsRecord(t.a, w.Size()), Layout: t.layout(), GradScaler: t.scalerState(), Tensors: map[string][]int{},
	}
	for name, shape := range gpt.ParameterShapes(t.a.Model) {
		for _, k := range t.savedFields() {
			m.Tensors[k.prefix+name] = shape
		}
	}
	for name, shape := range gpt.BufferShapes(t.a.Model) {
		m.Tensors[ckpt.ModelKey+name] = shape
	}
	per := len(mine) / 4
	for r := 0; r < w.Size(); r++ {
		rs := ckpt.RankState{Rank: r, TP: int(allCoords[3*r]), PP: int(allCoords[3*r+1]), DP: int(allCoords[3*r+2])}
		for k := 0; k < per && !t.a.NoSaveRNG; k++ {
			x := all[4*(r*per+k):]
			rs.RNG = append(rs.RNG, [4]uint64{uint64(x[0]), uint64(x[1]), uint64(x[2]), uint64(x[3])})
		}
		m.Ranks = append(m.Ranks, rs)
	}
	return m, nil
}

// finishSave installs the checkpoint being written, if any
// (ckpt.Saver.Finish), and calls t.onSaved with its iteration. Every rank
// calls it at the same points.
func (t *trainer) finishSave(ctx context.Context, blocking bool) error {
	it, err := t.saver.Finish(ctx, blocking)
	if err == nil && it > 0 && t.onSaved != nil {
		t.onSaved(it)
	}
	return err
}

// Hooks tests replace to make a save fail (the trainer's ckpt.Saver
// calls them).
var (
	writeShard       = ckpt.WriteShard
	commitCheckpoint = ckpt.Commit
)

// savedFields are the tensors a save writes: the weights, and the
// moments unless --no-save-optim.
func (t *trainer) savedFields() []keyField {
	if t.a.NoSaveOptim {
		return t.keyFields()[:1]
	}
	return t.keyFields()
}

// layout describes the run's parallel layout for the manifest.
func (t *trainer) layout() ckpt.Layout {
	l := ckpt.Layout{World: t.groups.World.Size(), TP: t.tp.Size(), PP: t.pp.Size(), VPP: t.a.Model.NumModelChunks(), DP: t.dp,
		CP: t.cpLayout(), DistributedOptimizer: t.a.DDP.UseDistributedOptimizer}
	if t.a.Model.NumMoEExperts > 0 {
		l.EP, l.ETP = moe.GroupSize(t.groups.Get(mesh.GroupEP)), moe.GroupSize(t.groups.Get(mesh.GroupExptTP))
	}
	return l
}

// cpLayout is the context-parallel size as the manifest records it: 0
// (absent) for 1.
func (t *trainer) cpLayout() int {
	if n := t.cp.Size(); n > 1 {
		return n
	}
	return 0
}

// checkpointPieces returns the boxes this rank writes (see save).
func (t *trainer) checkpointPieces() []ckpt.PieceData {
	whole := gpt.ParameterShapes(t.a.Model)
	var out []ckpt.PieceData
	segs := t.opt.Adam().Segments
	for i := range segs {
		s := &segs[i]
		p := s.Param
		if !t.writesOnce(p, t.writesOptimizerState) {
			continue
		}
		for _, k := range t.savedFields() {
			out = append(out, t.sharded(k.prefix+p.Name, p, whole[p.Name], s.Offset, k.field(s)).Pieces()...)
		}
	}
	return append(out, t.bufferPieces()...)
}

// sharded describes this rank's part of the whole tensor key of p (of
// shape whole): the local elements [lo, lo+len(data)) of p's local tensor,
// cut from the whole as the model's Partition says.
func (t *trainer) sharded(key string, p *nn.Parameter, whole []int, lo int, data []float32) ckpt.Sharded {
	return ckpt.Sharded{Key: key, Whole: whole, Local: p.Value.Shape(), Part: t.chunks[0].Partition(p), Lo: lo, Data: data}
}

// bufferPieces are the state tensors that are not parameters (the expert
// biases, BufferShapes), whole: every rank holds the same values; the
// first data-parallel replica's tensor-parallel rank 0 of each pipeline
// stage writes its stage's.
func (t *trainer) bufferPieces() []ckpt.PieceData {
	if t.dpg.Rank() != 0 || t.tp.Rank() != 0 {
		return nil
	}
	var out []ckpt.PieceData
	for _, c := range t.chunks {
		for name, v := range c.ExpertBiases() {
			out = append(out, ckpt.PieceData{Key: ckpt.ModelKey + name, Box: ckpt.Box{Offset: []int{0}, Shape: []int{len(v)}}, Data: append([]float32(nil), v...)})
		}
	}
	return out
}

// writesOptimizerState reports whether this rank's segments of p are
// saved: the first data-parallel replica's (for an expert's weights, the
// first expert data-parallel replica's: every expert-parallel rank holds
// its own experts), or under the distributed optimizer every
// data-parallel rank's of the first optimizer instance.
func (t *trainer) writesOptimizerState(p *nn.Parameter) bool {
	if !t.a.DDP.UseDistributedOptimizer {
		return t.firstReplica(p)
	}
	if t.a.DDP.NumDistributedOptimizerInstances <= 1 || t.a.DDP.HybridShardsOptimizer() {
		return true // (under HFSDP every instance holds pieces of its own)
	}
	inter := t.groups.Get(mesh.GroupInterDistOpt)
	return inter == nil || inter.Rank() == 0
}

// firstReplica reports whether this rank is in p's first data-parallel
// replica: the first dp·cp rank, or for an expert's weights the first
// expert data-parallel rank (every expert-parallel rank holds its own
// experts).
func (t *trainer) firstReplica(p *nn.Parameter) bool {
	if !p.Allreduce {
		return moe.GroupRank(t.groups.Get(mesh.GroupExptDP)) == 0
	}
	return t.dpg.Rank() == 0
}

// writesOnce reports whether this rank writes its pieces of p when every
// piece of the whole tensor is to be written once: not the tied
// embedding's copy (Shared), only where owner says (a data-parallel
// replica, or a shard), and a tensor-replicated parameter from TP rank 0.
func (t *trainer) writesOnce(p *nn.Parameter, owner func(*nn.Parameter) bool) bool {
	return !p.Shared && owner(p) && (p.Partitioned() || t.chunks[0].Partition(p).Rank == 0)
}
