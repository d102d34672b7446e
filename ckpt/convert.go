package ckpt

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// Key prefixes of a distributed checkpoint's tensors and the name
// prefixes of the same tensors in the whole-tensor form: a model tensor
// "model/NAME" is NAME in model.safetensors; Adam's moments
// "optimizer/exp_avg/NAME" and "optimizer/exp_avg_sq/NAME" are
// exp_avg.NAME and exp_avg_sq.NAME in optimizer.safetensors, and SGD's
// "optimizer/momentum_buffer/NAME" is momentum_buffer.NAME.
const (
	ModelKey       = "model/"
	ExpAvgKey      = "optimizer/exp_avg/"
	ExpAvgSqKey    = "optimizer/exp_avg_sq/"
	MomentumKey    = "optimizer/momentum_buffer/"
	expAvgPrefix   = "exp_avg."
	expAvgSqPrefix = "exp_avg_sq."
	momentumPrefix = "momentum_buffer."
)

// ToWhole reads every tensor of r's iteration whole into the
// whole-tensor Checkpoint (what Save writes): model tensors named NAME,
// Adam's moments exp_avg.NAME and exp_avg_sq.NAME, float32, sorted by
// name; State with the manifest's iteration, consumed samples, optimizer
// steps, loss scaler and arguments (ints under the same names, and the
// model options as the object "model"), and RNG every rank's generator
// states flattened in rank order (rank 0's default stream, its tracker's
// streams, then rank 1's, …), as the whole-tensor form stored them.
//
// The layout that saved (Manifest.Layout) and each rank's coordinates
// are not part of the whole-tensor form; FromWhole takes the layout back
// as an argument (WholeLayout reads it from the arguments a training run
// records). Every block read is verified (Reader.Fill), so a conversion
// that succeeds read an intact checkpoint. Before reading, the shards'
// sizes on disk are checked against the manifest and no tensor larger
// than the shards together is allocated, so a damaged manifest cannot
// make ToWhole allocate what the disk does not hold.
func ToWhole(r *Reader) (*Checkpoint, error) {
	m := r.Manifest
	held, err := r.checkSizes()
	if err != nil {
		return nil, err
	}
	st := State{Iteration: m.Iteration, ConsumedSamples: m.ConsumedSamples, OptimizerSteps: m.OptimizerSteps, SchedulerSamples: m.SchedulerSamples}
	st.Args = wholeArgs(m.Args)
	if len(m.GradScaler) > 0 {
		st.GradScaler = append(json.RawMessage(nil), m.GradScaler...)
	}
	for _, rs := range m.Ranks {
		st.RNG = append(st.RNG, rs.RNG...)
	}
	c := &Checkpoint{State: st}
	keys := make([]string, 0, len(m.Tensors))
	for k := range m.Tensors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		shape := m.Tensors[key]
		name, optimizer, ok := wholeName(key)
		if !ok {
			return nil, fmt.Errorf("%s: tensor %s is none of %s…, %s…, %s… and %s…: the whole-tensor form cannot hold it", filepath.Join(r.Dir, ManifestFile), key, ModelKey, ExpAvgKey, ExpAvgSqKey, MomentumKey)
		}
		n, err := numel(shape)
		if err != nil {
			return nil, fmt.Errorf("%s is damaged: tensor %s: %v: restore it or load an earlier iteration", filepath.Join(r.Dir, ManifestFile), key, err)
		}
		if 4*n > held {
			return nil, fmt.Errorf("%s is damaged: tensor %s of shape %v needs %d bytes, the shards hold %d in all: restore it or load an earlier iteration", filepath.Join(r.Dir, ManifestFile), key, shape, 4*n, held)
		}
		data := make([]float32, n)
		if err := r.Fill(key, Box{Offset: make([]int, len(shape)), Shape: shape}, data); err != nil {
			return nil, err
		}
		t := safetensors.F32(name, shape, data)
		if optimizer {
			c.Optimizer = append(c.Optimizer, t)
		} else {
			c.Model = append(c.Model, t)
		}
	}
	return c, nil
}

// checkSizes compares the size on disk of every shard with the
// manifest's record, refusing anything but regular files (without
// opening them: a named pipe would block), and returns the shards' total
// size: no tensor of an intact checkpoint holds more bytes.
func (r *Reader) checkSizes() (int64, error) {
	var held int64
	for _, s := range r.Manifest.Shards {
		path := shardPath(r.Dir, s.File)
		st, err := os.Stat(path)
		if err != nil {
			return 0, fmt.Errorf("%s: %w: restore the shard or load an earlier iteration", path, err)
		}
		if !st.Mode().IsRegular() {
			return 0, fmt.Errorf("%s is not a regular file: restore the shard", path)
		}
		if st.Size() != s.Size {
			return 0, &SizeError{File: path, Got: st.Size(), Want: s.Size}
		}
		held += s.Size
	}
	return held, nil
}

// wholeName maps a distributed checkpoint's key to its name in the
// whole-tensor form, and whether it belongs to optimizer.safetensors.
func wholeName(key string) (name string, optimizer, ok bool) {
	switch {
	case strings.HasPrefix(key, ModelKey) && len(key) > len(ModelKey):
		return key[len(ModelKey):], false, true
	case strings.HasPrefix(key, ExpAvgKey) && len(key) > len(ExpAvgKey):
		return expAvgPrefix + key[len(ExpAvgKey):], true, true
	case strings.HasPrefix(key, ExpAvgSqKey) && len(key) > len(ExpAvgSqKey):
		return expAvgSqPrefix + key[len(ExpAvgSqKey):], true, true
	case strings.HasPrefix(key, MomentumKey) && len(key) > len(MomentumKey):
		return momentumPrefix + key[len(MomentumKey):], true, true
	}
	return "", false, false
}

// distKey maps a whole-tensor name (of model.safetensors if !optimizer,
// else of optimizer.safetensors) to its distributed checkpoint key.
func distKey(name string, optimizer bool) (string, bool) {
	switch {
	case !optimizer && name != "":
		return ModelKey + name, true
	case strings.HasPrefix(name, expAvgSqPrefix) && len(name) > len(expAvgSqPrefix):
		return ExpAvgSqKey + name[len(expAvgSqPrefix):], true
	case strings.HasPrefix(name, expAvgPrefix) && len(name) > len(expAvgPrefix):
		return ExpAvgKey + name[len(expAvgPrefix):], true
	case strings.HasPrefix(name, momentumPrefix) && len(name) > len(momentumPrefix):
		return MomentumKey + name[len(momentumPrefix):], true
	}
	return "", false
}

// FromWhole writes the whole-tensor checkpoint c into dir as a
// distributed checkpoint of iteration c.State.Iteration with one shard
// (rank 0's, shard_00000.bin) holding every tensor whole, float32 (BF16
// and F16 tensors are widened exactly), and points dir's tracker at it
// (BeginSave, WriteShard, Commit: atomic, as a training save).
//
// Names map back to keys as ToWhole maps keys to names; an optimizer
// tensor named otherwise is an error. The manifest records layout as the
// layout that saved, and the state's iteration, consumed samples,
// optimizer steps, loss scaler and arguments (each must be an integer,
// but "model", an object of strings: the model options).
//
// The ranks' generator states: when layout.World ≥ 1 divides
// len(c.State.RNG), each of the World ranks gets its len/World states in
// order, with its coordinates in Megatron's default rank order
// (rank = tp + TP·(cp + CP·(dp + DP·pp)), CP = World/(TP·PP·DP)), so a run
// of that layout continues its streams. Otherwise the states cannot be
// split into ranks: they are all put on rank 0 (and a resumed run of any
// layout starts fresh streams, as after a change of layout).
func FromWhole(dir string, c *Checkpoint, layout Layout) error {
	st := c.State
	if err := st.validate(); err != nil {
		return fmt.Errorf("convert into %s: the state is invalid: %v: fix state.json", dir, err)
	}
	m := &Manifest{Iteration: st.Iteration, ConsumedSamples: st.ConsumedSamples, OptimizerSteps: st.OptimizerSteps, SchedulerSamples: st.SchedulerSamples,
		Layout: layout, Tensors: map[string][]int{}}
	if len(st.GradScaler) > 0 {
		m.GradScaler = append(json.RawMessage(nil), st.GradScaler...)
	}
	args, err := manifestArgs(st.Args)
	if err != nil {
		return fmt.Errorf("convert into %s: %v", dir, err)
	}
	m.Args = args
	m.Ranks = splitRanks(st.RNG, layout)

	var pieces []PieceData
	for _, part := range []struct {
		file      string
		tensors   []safetensors.Tensor
		optimizer bool
	}{{"model.safetensors", c.Model, false}, {"optimizer.safetensors", c.Optimizer, true}} {
		for _, t := range part.tensors {
			key, ok := distKey(t.Name, part.optimizer)
			if !ok {
				return fmt.Errorf("convert into %s: %s holds tensor %q, none of %s…, %s… and %s…: rename or remove it", dir, part.file, t.Name, expAvgPrefix, expAvgSqPrefix, momentumPrefix)
			}
			if _, dup := m.Tensors[key]; dup {
				return fmt.Errorf("convert into %s: %s holds tensor %q twice: remove one", dir, part.file, t.Name)
			}
			data, err := t.Float32()
			if err != nil {
				return fmt.Errorf("convert into %s: %s: %v", dir, part.file, err)
			}
			shape := append([]int{}, t.Shape...)
			m.Tensors[key] = shape
			if len(data) == 0 {
				continue // an empty tensor has no piece
			}
			pieces = append(pieces, PieceData{Key: key, Box: Box{Offset: make([]int, len(shape)), Shape: shape}, Data: data})
		}
	}
	sort.Slice(pieces, func(i, j int) bool { return pieces[i].Key < pieces[j].Key })

	tmp, err := BeginSave(dir, m.Iteration, rand.Uint64())
	if err != nil {
		return err
	}
	s, err := WriteShard(tmp, 0, pieces)
	if err != nil {
		RemoveTemp(tmp)
		return fmt.Errorf("convert into %s: writing %s: %w", dir, ShardFile(0), err)
	}
	m.Shards = []Shard{s}
	return Commit(dir, tmp, m)
}

// intArgs converts the whole-tensor form's arguments (ints, or float64
// after a JSON round trip) to the manifest's integers.
func intArgs(in map[string]any) (map[string]int, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := map[string]int{}
	for k, v := range in {
		var n int
		ok := true
		switch x := v.(type) {
		case int:
			n = x
		case int64:
			n, ok = int(x), int64(int(x)) == x
		case float64:
			ok = x == math.Trunc(x) && math.Abs(x) <= 1<<53
			n = int(x)
		case json.Number:
			i, err := x.Int64()
			n, ok = int(i), err == nil && int64(int(i)) == i
		default:
			ok = false
		}
		if !ok {
			return nil, fmt.Errorf("argument %q is %v, not an integer: the distributed manifest records integer settings (and the model options, as the object \"model\"); remove it from state.json", k, v)
		}
		out[k] = n
	}
	return out, nil
}

// splitRanks gives each rank of layout its share of the flattened
// generator states (see FromWhole), or rank 0 all of them.
func splitRanks(rng [][4]uint64, l Layout) []RankState {
	if l.World < 1 || len(rng)%l.World != 0 {
		if len(rng) == 0 {
			return nil
		}
		return []RankState{{Rank: 0, RNG: append([][4]uint64(nil), rng...)}}
	}
	per := len(rng) / l.World
	out := make([]RankState, l.World)
	tp, pp, dp := max(l.TP, 1), max(l.PP, 1), max(l.DP, 1)
	cp := l.ContextParallel()
	coords := l.World == tp*pp*dp*cp
	if l.CP == 0 && l.World%(tp*pp*dp) == 0 {
		coords, cp = true, l.World/(tp*pp*dp)
	}
	for r := range out {
		out[r] = RankState{Rank: r}
		if per > 0 {
			out[r].RNG = append([][4]uint64(nil), rng[r*per:(r+1)*per]...)
		}
		if coords {
			out[r].TP = r % tp
			out[r].DP = r / tp % (cp * dp) // the rank in the dp×cp group (order tp-cp-dp-pp)
			out[r].PP = r / (tp * cp * dp)
		}
	}
	return out
}

// WholeLayout returns the parallel layout recorded in a whole-tensor
// checkpoint's arguments (world_size, tensor_model_parallel_size,
// pipeline_model_parallel_size, virtual_pipeline_model_parallel_size,
// context_parallel_size: each 1 when absent), with DP = World/(TP·PP·CP).
// The whole-tensor form does not record whether the distributed optimizer
// was used: DistributedOptimizer is false (it does not affect how a
// checkpoint is read back).
func WholeLayout(s State) Layout {
	get := func(k string) int {
		if n, err := intArgs(map[string]any{k: s.Args[k]}); err == nil && n[k] >= 1 {
			return n[k]
		}
		return 1
	}
	l := Layout{World: get("world_size"), TP: get("tensor_model_parallel_size"), PP: get("pipeline_model_parallel_size"),
		VPP: get("virtual_pipeline_model_parallel_size")}
	if cp := get("context_parallel_size"); cp > 1 {
		l.CP = cp
	}
	l.DP = max(l.World/(l.TP*l.PP*l.ContextParallel()), 1)
	return l
}
