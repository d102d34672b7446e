package ckpt

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// distSave writes iteration it of a two-tensor checkpoint as two ranks
// would: rank 0 the first rows of "model/w" [6, 4] and all of "model/b"
// [4], rank 1 the rest of w as a partial row and a block of rows.
func distSave(t *testing.T, dir string, it int) {
	t.Helper()
	w := make([]float32, 24)
	for i := range w {
		w[i] = float32(i + it)
	}
	b := []float32{-1, -2, -3, -4}
	tmp, err := BeginSave(dir, it, uint64(it)*7919)
	if err != nil {
		t.Fatal(err)
	}
	var shards []Shard
	for rank, lohi := range [][2]int{{0, 9}, {9, 24}} {
		var pieces []PieceData
		for _, bx := range FlatBoxes([]int{6, 4}, lohi[0], lohi[1]) {
			d := make([]float32, bx.Numel())
			CopyBox(d, w, []int{6, 4}, 0, bx)
			pieces = append(pieces, PieceData{Key: "model/w", Box: bx, Data: d})
		}
		if rank == 0 {
			pieces = append(pieces, PieceData{Key: "model/b", Box: Box{Offset: []int{0}, Shape: []int{4}}, Data: b})
		}
		s, err := WriteShard(tmp, rank, pieces)
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, s)
	}
	m := &Manifest{Iteration: it, OptimizerSteps: it, Tensors: map[string][]int{"model/w": {6, 4}, "model/b": {4}}, Shards: shards,
		Ranks: []RankState{{Rank: 0, RNG: [][4]uint64{{1, 2, 3, 4}}}, {Rank: 1, RNG: [][4]uint64{{5, 6, 7, 8}}}}}
	if err := Commit(dir, tmp, m); err != nil {
		t.Fatal(err)
	}
}

func TestDistributedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	distSave(t, dir, 3)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	whole := make([]float32, 24)
	if err := r.Fill("model/w", Box{Offset: []int{0, 0}, Shape: []int{6, 4}}, whole); err != nil {
		t.Fatal(err)
	}
	for i, v := range whole {
		if v != float32(i+3) {
			t.Fatalf("element %d: %g", i, v)
		}
	}
	// A column block across both ranks' pieces, as another TP layout reads.
	col := make([]float32, 12)
	if err := r.Fill("model/w", Box{Offset: []int{0, 2}, Shape: []int{6, 2}}, col); err != nil {
		t.Fatal(err)
	}
	want := []float32{5, 6, 9, 10, 13, 14, 17, 18, 21, 22, 25, 26}
	if !slices.Equal(col, want) {
		t.Fatalf("columns 2:4: %v, want %v", col, want)
	}
	if r.Manifest.Ranks[1].RNG[0] != [4]uint64{5, 6, 7, 8} || r.Manifest.Iteration != 3 {
		t.Fatalf("manifest %+v", r.Manifest)
	}
	if err := r.Fill("model/x", Box{Offset: []int{0}, Shape: []int{1}}, make([]float32, 1)); err == nil {
		t.Fatal("an unknown tensor was read")
	}
}

// TestDistributedFlippedBitNamesShardAndTensor flips one bit in a shard
// and one in the manifest: reading the piece, and opening, fail naming
// the file and the tensor.
func TestDistributedFlippedBitNamesShardAndTensor(t *testing.T) {
	dir := t.TempDir()
	distSave(t, dir, 3)
	shard := filepath.Join(IterDir(dir, 3), ShardFile(1))
	flip(t, shard, 13)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = r.Fill("model/w", Box{Offset: []int{0, 0}, Shape: []int{6, 4}}, make([]float32, 24))
	var de *DamageError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), ShardFile(1)) || !strings.Contains(err.Error(), "tensor model/w") {
		t.Fatalf("got %v, want a damage error naming %s and model/w", err, ShardFile(1))
	}
	// Rank 0's rows do not touch the damaged shard.
	if err := r.Fill("model/w", Box{Offset: []int{0, 0}, Shape: []int{2, 4}}, make([]float32, 8)); err != nil {
		t.Fatalf("an undamaged piece: %v", err)
	}
	flip(t, filepath.Join(IterDir(dir, 3), ManifestFile), 200)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), ManifestFile+" is damaged") {
		t.Fatalf("damaged manifest: %v", err)
	}
}

func flip(t *testing.T, path string, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCommitRefusesBadManifests: overlapping or incomplete pieces are
// refused before anything is installed, and the temporary directory is
// removed.
func TestCommitRefusesBadManifests(t *testing.T) {
	dir := t.TempDir()
	for name, pieces := range map[string][]PieceData{
		"incomplete": {{Key: "model/b", Box: Box{Offset: []int{0}, Shape: []int{3}}, Data: make([]float32, 3)}},
		"overlap": {{Key: "model/b", Box: Box{Offset: []int{0}, Shape: []int{3}}, Data: make([]float32, 3)},
			{Key: "model/b", Box: Box{Offset: []int{2}, Shape: []int{2}}, Data: make([]float32, 2)}},
	} {
		tmp, err := BeginSave(dir, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		s, err := WriteShard(tmp, 0, pieces)
		if err != nil {
			t.Fatal(err)
		}
		err = Commit(dir, tmp, &Manifest{Iteration: 1, Tensors: map[string][]int{"model/b": {4}}, Shards: []Shard{s}})
		if err == nil {
			t.Errorf("%s: committed", name)
		}
		if _, e := os.Stat(tmp); !errors.Is(e, os.ErrNotExist) {
			t.Errorf("%s: the temporary directory is left: %v", name, e)
		}
	}
	if _, err := Latest(dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("a refused save installed something: %v", err)
	}
}

// TestFailedCommitKeepsPreviousCheckpoint aborts a distributed save at
// each stage: the previous iteration still opens.
func TestFailedCommitKeepsPreviousCheckpoint(t *testing.T) {
	for _, stage := range []string{"manifest", "rename", "tracker"} {
		dir := t.TempDir()
		distSave(t, dir, 2)
		tmp, err := BeginSave(dir, 4, 9)
		if err != nil {
			t.Fatal(err)
		}
		s, err := WriteShard(tmp, 0, []PieceData{{Key: "model/b", Box: Box{Offset: []int{0}, Shape: []int{4}}, Data: make([]float32, 4)}})
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("disk full")
		err = commit(dir, tmp, &Manifest{Iteration: 4, Tensors: map[string][]int{"model/b": {4}}, Shards: []Shard{s}}, func(st string) error {
			if st == stage {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("%s: %v", stage, err)
		}
		r, err := Open(dir)
		if stage == "tracker" {
			// The new iteration is complete but the tracker still names 2.
			if err != nil || r.Manifest.Iteration != 2 {
				t.Fatalf("%s: %v", stage, err)
			}
			continue
		}
		if err != nil || r.Manifest.Iteration != 2 {
			t.Fatalf("%s: the previous checkpoint does not open: %v", stage, err)
		}
		r.Close()
	}
}

// TestFillReadsOnlyWhatItNeeds: a column of a large row-major piece (a
// row-parallel weight read at another TP split) costs its own values and
// one checksum block, not the piece's span; the values are right.
func TestFillReadsOnlyWhatItNeeds(t *testing.T) {
	dir := t.TempDir()
	const rows, cols = 2048, 1024 // 8 MiB
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(i)
	}
	tmp, err := BeginSave(dir, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := WriteShard(tmp, 0, []PieceData{{Key: "model/w", Box: Box{Offset: []int{0, 0}, Shape: []int{rows, cols}}, Data: w}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Commit(dir, tmp, &Manifest{Iteration: 1, Tensors: map[string][]int{"model/w": {rows, cols}}, Shards: []Shard{s}}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	col := make([]float32, rows)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := r.Fill("model/w", Box{Offset: []int{0, 7}, Shape: []int{rows, 1}}, col); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*BlockSize {
		t.Errorf("a %d-value column allocated %d bytes", rows, got)
	}
	for i, v := range col {
		if v != float32(i*cols+7) {
			t.Fatalf("row %d: %g", i, v)
		}
	}
}

// TestManifestRefusals: shard names other than ShardFile's, a shape
// whose non-zero dimensions overflow in either order, and a box whose
// offset lacks dimensions are errors, not panics or reads elsewhere.
func TestManifestRefusals(t *testing.T) {
	for _, name := range []string{".", "..", "../x.bin", "shard_.bin", "shard_1a.bin", "x"} {
		if validShardName(name) {
			t.Errorf("%q accepted as a shard name", name)
		}
	}
	if !validShardName(ShardFile(12)) {
		t.Errorf("%s refused", ShardFile(12))
	}
	for _, shape := range [][]int{{0, 1 << 62}, {1 << 62, 0}} {
		if _, err := numel(shape); err == nil {
			t.Errorf("shape %v accepted", shape)
		}
	}
	dir := t.TempDir()
	distSave(t, dir, 3)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Fill("model/b", Box{Shape: []int{4}}, make([]float32, 4)); err == nil {
		t.Error("a box without offsets was read")
	}
}
