package ckpt

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// richLayout is the layout richSave records: two tensor-parallel ranks.
var richLayout = Layout{World: 2, TP: 2, PP: 1, VPP: 1, DP: 1}

// richValues returns the values richSave stores in tensor key of shape:
// distinct per key and element, and not all representable as small
// integers, so that a misplaced element or a lost bit shows.
func richValues(key string, shape []int) []float32 {
	n, _ := numel(shape)
	out := make([]float32, n)
	h := float32(len(key)) * 0.37
	for i := range out {
		out[i] = h + float32(i)*1.0001 - float32(i%7)*0.5
	}
	return out
}

// richTensors are the tensors of richSave: a matrix cut into flat ranges
// by two ranks, its Adam moments, a bias, a 2.4 MB matrix whose rank-0
// piece spans two checksum blocks, a scalar and an empty tensor.
var richTensors = map[string][]int{
	"model/w": {6, 4}, "optimizer/exp_avg/w": {6, 4}, "optimizer/exp_avg_sq/w": {6, 4},
	"model/b": {4}, "optimizer/exp_avg/b": {4}, "optimizer/exp_avg_sq/b": {4},
	"model/big": {600, 1000}, "model/s": {}, "model/e": {0, 3},
}

// richSave writes iteration it of a two-rank distributed checkpoint of
// richTensors into dir, with arguments, a loss scaler, the layout and two
// generator states per rank, as train.save would. Rank 0 holds the first
// 9 elements of each w tensor, the b tensors, rows 0–399 of big (two
// blocks) and the scalar; rank 1 the rest of w and rows 400–599 of big.
func richSave(t testing.TB, dir string, it int) *Manifest {
	t.Helper()
	tmp, err := BeginSave(dir, it, uint64(it)+17)
	if err != nil {
		t.Fatal(err)
	}
	var ranks [2][]PieceData
	add := func(rank int, key string, boxes ...Box) {
		whole := richTensors[key]
		vals := richValues(key, whole)
		for _, bx := range boxes {
			d := make([]float32, bx.Numel())
			CopyBox(d, vals, whole, 0, bx)
			ranks[rank] = append(ranks[rank], PieceData{Key: key, Box: bx, Data: d})
		}
	}
	for _, k := range []string{"model/w", "optimizer/exp_avg/w", "optimizer/exp_avg_sq/w"} {
		add(0, k, FlatBoxes([]int{6, 4}, 0, 9)...)
		add(1, k, FlatBoxes([]int{6, 4}, 9, 24)...)
	}
	for _, k := range []string{"model/b", "optimizer/exp_avg/b", "optimizer/exp_avg_sq/b"} {
		add(0, k, Box{Offset: []int{0}, Shape: []int{4}})
	}
	add(0, "model/big", Box{Offset: []int{0, 0}, Shape: []int{400, 1000}})
	add(1, "model/big", Box{Offset: []int{400, 0}, Shape: []int{200, 1000}})
	add(0, "model/s", Box{Offset: []int{}, Shape: []int{}})
	m := &Manifest{Iteration: it, ConsumedSamples: 8 * int64(it), OptimizerSteps: it - 1,
		Args:       Args{Ints: map[string]int{"num_layers": 2, "world_size": 2, "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1, "virtual_pipeline_model_parallel_size": 1}},
		Layout:     richLayout,
		GradScaler: json.RawMessage(`{"scale":1024,"growth_tracker":3,"hysteresis_tracker":2}`),
		Tensors:    richTensors,
		Ranks: []RankState{
			{Rank: 0, TP: 0, RNG: [][4]uint64{{1, 2, 3, 4}, {5, 6, 7, 8}}},
			{Rank: 1, TP: 1, RNG: [][4]uint64{{9, 10, 11, 12}, {13, 14, 15, math.MaxUint64}}},
		}}
	for rank, pieces := range ranks {
		s, err := WriteShard(tmp, rank, pieces)
		if err != nil {
			t.Fatal(err)
		}
		m.Shards = append(m.Shards, s)
	}
	if err := Commit(dir, tmp, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// pieceOf returns the piece of key in shard rank of m whose box starts at
// offset.
func pieceOf(t *testing.T, m *Manifest, rank int, key string, offset ...int) Piece {
	t.Helper()
	for _, p := range m.Shards[rank].Pieces {
		if p.Key == key && slices.Equal(p.Offset, offset) {
			return p
		}
	}
	t.Fatalf("shard %d has no piece of %s at %v", rank, key, offset)
	return Piece{}
}

func openRich(t *testing.T) (string, *Reader) {
	t.Helper()
	dir := t.TempDir()
	richSave(t, dir, 4)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return dir, r
}

func TestVerifyIntact(t *testing.T) {
	_, r := openRich(t)
	rep, err := r.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Shards) != 2 || rep.Shards[0].File != ShardFile(0) || rep.Shards[1].Rank != 1 {
		t.Fatalf("shards %+v", rep.Shards)
	}
	var bytes int64
	pieces := 0
	for _, s := range rep.Shards {
		st, err := os.Stat(filepath.Join(r.Dir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		if s.Bytes != st.Size() || s.Actual != st.Size() {
			t.Errorf("%s: %d/%d bytes, the file has %d", s.File, s.Bytes, s.Actual, st.Size())
		}
		bytes += s.Bytes
		pieces += s.Pieces
	}
	// Each w tensor: rows 0–1 and element [2, 0] on rank 0, the rest of
	// row 2 and rows 3–5 on rank 1; the b tensors, the scalar and big's
	// first piece (two blocks) on rank 0, big's second on rank 1.
	if want := 3*4 + 3 + 1 + 2; pieces != want {
		t.Errorf("%d pieces, want %d", pieces, want)
	}
	if rep.Bytes != bytes || bytes != 4*(3*24+3*4+600000+1) {
		t.Errorf("%d bytes in the report, %d in the shards", rep.Bytes, bytes)
	}
	if rep.Blocks != pieces+1 || rep.Verified != rep.Blocks || rep.Damaged != 0 {
		t.Errorf("blocks %d, verified %d, damaged %d; want %d, all verified", rep.Blocks, rep.Verified, rep.Damaged, pieces+1)
	}
	if len(rep.Tensors) != len(richTensors) || rep.Tensors[0].Key != "model/b" {
		t.Fatalf("tensors %+v", rep.Tensors)
	}
	wantPieces := map[string]int{"model/w": 4, "optimizer/exp_avg/w": 4, "optimizer/exp_avg_sq/w": 4,
		"model/b": 1, "optimizer/exp_avg/b": 1, "optimizer/exp_avg_sq/b": 1, "model/big": 2, "model/s": 1, "model/e": 0}
	for _, tr := range rep.Tensors {
		if tr.Pieces != wantPieces[tr.Key] || !slices.Equal(tr.Shape, richTensors[tr.Key]) {
			t.Errorf("%s: shape %v in %d pieces, want %v in %d", tr.Key, tr.Shape, tr.Pieces, richTensors[tr.Key], wantPieces[tr.Key])
		}
	}
}

// TestVerifyCollectsEveryDamage flips a bit in the second block of big's
// rank-0 piece and one in a piece of w on rank 1: both are reported, each
// naming the shard, the tensor and the piece, and every other block is
// verified.
func TestVerifyCollectsEveryDamage(t *testing.T) {
	_, r := openRich(t)
	m := r.Manifest
	big := pieceOf(t, m, 0, "model/big", 0, 0)
	w := pieceOf(t, m, 1, "optimizer/exp_avg_sq/w", 3, 0)
	flip(t, filepath.Join(r.Dir, ShardFile(0)), int(big.Pos)+BlockSize+5)
	flip(t, filepath.Join(r.Dir, ShardFile(1)), int(w.Pos)+2)
	rep, err := r.Verify()
	if err == nil {
		t.Fatal("two flipped bits verified")
	}
	var des []*DamageError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var de *DamageError
		if !errors.As(e, &de) {
			t.Fatalf("%v is not a DamageError", e)
		}
		des = append(des, de)
	}
	if len(des) != 2 {
		t.Fatalf("%d damages, want 2: %v", len(des), err)
	}
	want := []struct {
		file, key string
		box       Box
		block     int
	}{{ShardFile(0), "model/big", big.Box, 1}, {ShardFile(1), "optimizer/exp_avg_sq/w", w.Box, 0}}
	for i, d := range des {
		msg := d.Error()
		if filepath.Base(d.File) != want[i].file || d.Key != want[i].key || d.Box.String() != want[i].box.String() || d.Block != want[i].block ||
			!strings.Contains(msg, want[i].file) || !strings.Contains(msg, want[i].key) || !strings.Contains(msg, want[i].box.String()) {
			t.Errorf("damage %d: %v, want %s %s %s block %d", i, d, want[i].file, want[i].key, want[i].box, want[i].block)
		}
	}
	if rep.Damaged != 2 || rep.Verified != rep.Blocks-2 {
		t.Errorf("damaged %d, verified %d of %d", rep.Damaged, rep.Verified, rep.Blocks)
	}
}

// TestVerifyShardSizes: a truncated shard, one with a byte appended and
// a missing one are damage, reported with the pieces they cut.
func TestVerifyShardSizes(t *testing.T) {
	_, r := openRich(t)
	m := r.Manifest
	s0, s1 := filepath.Join(r.Dir, ShardFile(0)), filepath.Join(r.Dir, ShardFile(1))
	if err := os.Truncate(s0, m.Shards[0].Size-2); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(s1, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	rep, err := r.Verify()
	var se *SizeError
	var me *MissingError
	if !errors.As(err, &se) || !errors.As(err, &me) {
		t.Fatalf("got %v, want size and missing-block errors", err)
	}
	last := m.Shards[0].Pieces[len(m.Shards[0].Pieces)-1]
	for _, w := range []string{ShardFile(0) + " is damaged: it is", "truncated", ShardFile(1) + " is damaged: it is", "longer than saved",
		"tensor " + last.Key + ", piece " + last.Box.String() + ", block 0 cannot be read"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("%d errors, want 3:\n%v", n, err)
	}
	if rep.Damaged != 1 || rep.Verified != rep.Blocks-1 || rep.Shards[0].Actual != m.Shards[0].Size-2 {
		t.Errorf("damaged %d, verified %d of %d, shard 0 %+v", rep.Damaged, rep.Verified, rep.Blocks, rep.Shards[0])
	}

	os.Remove(s1)
	rep, err = r.Verify()
	if err == nil || strings.Count(err.Error(), ShardFile(1)+" is damaged: tensor") != len(m.Shards[1].Pieces) || !strings.Contains(err.Error(), "the file is missing") {
		t.Errorf("a missing shard: %v", err)
	}
	if rep.Shards[1].Actual != -1 {
		t.Errorf("missing shard: %+v", rep.Shards[1])
	}
}

// TestVerifyAndToWholeTrustNoClaimedSize: a manifest (with a valid
// checksum) that claims a 1 GiB tensor in a shard of 4 bytes: Verify
// reports the short shard and ToWhole refuses, neither allocating the
// claimed size.
func TestVerifyAndToWholeTrustNoClaimedSize(t *testing.T) {
	dir := t.TempDir()
	tmp, err := BeginSave(dir, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := WriteShard(tmp, 0, []PieceData{{Key: "model/b", Box: Box{Offset: []int{0}, Shape: []int{1}}, Data: []float32{1}}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 28
	s.Pieces = append(s.Pieces, Piece{Key: "model/h", Box: Box{Offset: []int{0}, Shape: []int{n}}, Pos: 4, CRC: make([]uint32, 4*n/BlockSize)})
	s.Size = 4 + 4*n
	if err := Commit(dir, tmp, &Manifest{Iteration: 1, Tensors: map[string][]int{"model/b": {1}, "model/h": {n}}, Shards: []Shard{s}}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	alloc := allocated(func() {
		_, err = r.Verify()
	})
	var se *SizeError
	var me *MissingError
	if !errors.As(err, &se) || !errors.As(err, &me) || me.Key != "model/h" || me.Blocks != 4*n/BlockSize {
		t.Errorf("Verify: %v", err)
	}
	if alloc > 4<<20 {
		t.Errorf("Verify allocated %d bytes", alloc)
	}
	alloc = allocated(func() {
		_, err = ToWhole(r)
	})
	if !errors.As(err, &se) {
		t.Errorf("ToWhole: %v", err)
	}
	if alloc > 1<<20 {
		t.Errorf("ToWhole allocated %d bytes", alloc)
	}
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
