package ckpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fuzzFillLimit bounds the tensors FuzzOpen reads whole (elements): Fill
// allocates the span of each piece it reads as the manifest records it
// before reading (see readBlocks), so the harness reads only tensors
// whose size it can afford; Verify and ToWhole must bound themselves.
const fuzzFillLimit = 1 << 16

// fuzzManifestSave writes iteration 1 of a small two-rank checkpoint into
// dir (BeginSave, WriteShard, Commit, as a training save): "model/w" [6,
// 4] and its first moment cut into flat ranges by the two ranks, "model/b"
// [4] and the scalar "model/s" on rank 0 and 1, and the empty "model/e"
// [0, 3], with arguments, a loss scaler, the layout and generator states.
func fuzzManifestSave(tb testing.TB, dir string) {
	tb.Helper()
	tmp, err := BeginSave(dir, 1, 99)
	if err != nil {
		tb.Fatal(err)
	}
	w := make([]float32, 24)
	for i := range w {
		w[i] = float32(i) * 0.25
	}
	var shards []Shard
	for rank, lohi := range [][2]int{{0, 9}, {9, 24}} {
		var pieces []PieceData
		for _, key := range []string{"model/w", "optimizer/exp_avg/w"} {
			for _, bx := range FlatBoxes([]int{6, 4}, lohi[0], lohi[1]) {
				d := make([]float32, bx.Numel())
				CopyBox(d, w, []int{6, 4}, 0, bx)
				pieces = append(pieces, PieceData{Key: key, Box: bx, Data: d})
			}
		}
		if rank == 0 {
			pieces = append(pieces, PieceData{Key: "model/b", Box: Box{Offset: []int{0}, Shape: []int{4}}, Data: []float32{-1, -2, -3, -4}})
		} else {
			pieces = append(pieces, PieceData{Key: "model/s", Box: Box{Offset: []int{}, Shape: []int{}}, Data: []float32{7}})
		}
		s, err := WriteShard(tmp, rank, pieces)
		if err != nil {
			tb.Fatal(err)
		}
		shards = append(shards, s)
	}
	m := &Manifest{Iteration: 1, ConsumedSamples: 8, OptimizerSteps: 1, Args: Args{Ints: map[string]int{"world_size": 2, "tensor_model_parallel_size": 2}},
		Layout: Layout{World: 2, TP: 2, PP: 1, VPP: 1, DP: 1}, GradScaler: json.RawMessage(`{"scale":1024}`),
		Tensors: map[string][]int{"model/w": {6, 4}, "optimizer/exp_avg/w": {6, 4}, "model/b": {4}, "model/s": {}, "model/e": {0, 3}},
		Shards:  shards,
		Ranks:   []RankState{{Rank: 0, RNG: [][4]uint64{{1, 2, 3, 4}}}, {Rank: 1, TP: 1, RNG: [][4]uint64{{5, 6, 7, 8}}}}}
	if err := Commit(dir, tmp, m); err != nil {
		tb.Fatal(err)
	}
}

// wrapManifest returns the manifest file holding body with its checksum.
func wrapManifest(body []byte) []byte {
	return fmt.Appendf(nil, "{\"crc32c\": \"%08x\", \"manifest\": %s}\n", crc32.Checksum(body, castagnoli), body)
}

// FuzzOpen writes the fuzz input as the manifest of iteration 1 (as the
// whole file, or, with wrap, as the manifest's body under its correct
// checksum, so that the input reaches the validation behind the checksum)
// next to a tracker naming 1 and, with shards, the two valid shards of
// fuzzManifestSave, then calls Open, Verify, Fill of every tensor's whole
// box and ToWhole. None may panic; every error must name the directory;
// Verify and ToWhole may allocate in proportion to the manifest and the
// shards on disk, never to the sizes the manifest claims; and they must
// agree: the checkpoint verifies exactly when every tensor reads back and
// converts.
func FuzzOpen(f *testing.F) {
	seed := f.TempDir()
	fuzzManifestSave(f, seed)
	valid, err := os.ReadFile(filepath.Join(IterDir(seed, 1), ManifestFile))
	if err != nil {
		f.Fatal(err)
	}
	var mf manifestFile
	if err := json.Unmarshal(valid, &mf); err != nil {
		f.Fatal(err)
	}
	body := []byte(mf.Manifest)
	var shardData [2][]byte
	for rank := range shardData {
		if shardData[rank], err = os.ReadFile(filepath.Join(IterDir(seed, 1), ShardFile(rank))); err != nil {
			f.Fatal(err)
		}
	}

	// The seeds. Whole files: valid, truncated, bit-flipped, empty, not a
	// manifest.
	flipped := func(b []byte, at int) []byte {
		c := bytes.Clone(b)
		c[at%len(c)] ^= 0x04
		return c
	}
	for _, shards := range []bool{true, false} {
		f.Add(valid, false, shards)
		f.Add(body, true, shards)
	}
	for _, b := range [][]byte{valid[:len(valid)/2], valid[:len(valid)-3], flipped(valid, 200), flipped(valid, len(valid)/2), nil, []byte("{}"), []byte("null"),
		[]byte(`{"crc32c":"00000000"}`), []byte(`{"iteration":1,"consumed_train_samples":8,"optimizer_steps":1}`)} {
		f.Add(b, false, true)
	}
	// Bodies under a correct checksum: truncated, bit-flipped (digits of
	// offsets and positions change), then edited manifests.
	for _, b := range [][]byte{body[:len(body)/2], flipped(body, len(body)/3), flipped(body, len(body)/2), flipped(body, 2*len(body)/3), []byte("null"), []byte("{}")} {
		f.Add(b, true, true)
	}
	var m0 Manifest
	if err := json.Unmarshal(body, &m0); err != nil {
		f.Fatal(err)
	}
	edit := func(mod func(m *Manifest)) []byte {
		var m Manifest
		json.Unmarshal(body, &m)
		mod(&m)
		b, err := json.Marshal(&m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	p0 := func(m *Manifest) *Piece { return &m.Shards[0].Pieces[0] }
	for _, mod := range []func(m *Manifest){
		// Wrong format, state, iteration.
		func(m *Manifest) { m.Format = "gotron-distributed-2" },
		func(m *Manifest) { m.Format = "" },
		func(m *Manifest) { m.Iteration = 2 },
		func(m *Manifest) { m.OptimizerSteps = 5 },
		func(m *Manifest) { m.ConsumedSamples = -1 },
		// Huge shapes: beyond 2⁶⁰ elements, at the bound, beyond an int's
		// bytes behind a zero, and a 1 GiB tensor whose one piece the
		// manifest places in a shard it claims to be 1 GiB long.
		func(m *Manifest) { m.Tensors["model/b"] = []int{1 << 40, 1 << 40} },
		func(m *Manifest) { m.Tensors["model/b"] = []int{1 << 30, 1 << 30} },
		func(m *Manifest) { m.Tensors["model/b"] = []int{math.MaxInt, 2} },
		func(m *Manifest) { m.Tensors["model/x"] = []int{0, 1 << 62} },
		func(m *Manifest) { m.Tensors["model/x"] = []int{0, math.MaxInt, math.MaxInt} },
		func(m *Manifest) {
			const n = 1 << 28
			m.Tensors["model/h"] = []int{n}
			m.Shards[0].Pieces = append(m.Shards[0].Pieces, Piece{Key: "model/h", Box: Box{Offset: []int{0}, Shape: []int{n}}, Pos: m.Shards[0].Size, CRC: make([]uint32, 4*n/BlockSize)})
			m.Shards[0].Size += 4 * n
		},
		func(m *Manifest) {
			const n = 1 << 14 // a column of it would make Fill allocate the whole 1 GiB span
			m.Tensors["model/h"] = []int{n, n}
			m.Shards[1].Pieces = append(m.Shards[1].Pieces, Piece{Key: "model/h", Box: Box{Offset: []int{0, 0}, Shape: []int{n, n}}, Pos: m.Shards[1].Size, CRC: make([]uint32, 4*n*n/BlockSize)})
			m.Shards[1].Size += 4 * n * n
		},
		// Negative and out-of-range offsets, positions, sizes, shapes.
		func(m *Manifest) { p0(m).Offset[0] = -1 },
		func(m *Manifest) { p0(m).Offset[0] = 1 << 62 },
		func(m *Manifest) { p0(m).Shape[0] = -2 },
		func(m *Manifest) { p0(m).Shape = p0(m).Shape[:1] },
		func(m *Manifest) { p0(m).Pos = -4 },
		func(m *Manifest) { p0(m).Pos = math.MaxInt64 },
		func(m *Manifest) { m.Shards[0].Size = -1 },
		func(m *Manifest) { m.Shards[0].Size = math.MaxInt64 },
		func(m *Manifest) { m.Shards[0].Size++ },
		func(m *Manifest) { m.Tensors["model/w"] = []int{-6, -4} },
		func(m *Manifest) { p0(m).CRC = nil },
		func(m *Manifest) { p0(m).CRC = append(p0(m).CRC, 0) },
		// Overlapping pieces: in the tensor, and in the file (two pieces of
		// one size at one position).
		func(m *Manifest) { p0(m).Shape[0]++ },
		func(m *Manifest) {
			m.Shards[0].Pieces = append(m.Shards[0].Pieces, m.Shards[0].Pieces[0])
		},
		func(m *Manifest) {
			a, b := &m.Shards[0].Pieces[1], &m.Shards[1].Pieces[1]
			a.Pos = b.Pos
		},
		func(m *Manifest) { m.Shards[1].Pieces[0].Pos = 0 },
		// Missing and extra pieces and tensors; another key's piece.
		func(m *Manifest) { m.Shards[1].Pieces = nil },
		func(m *Manifest) { delete(m.Tensors, "model/s") },
		func(m *Manifest) { m.Tensors["model/z"] = []int{1} },
		func(m *Manifest) { p0(m).Key = "optimizer/exp_avg/w" },
		func(m *Manifest) {
			m.Tensors["other/w"] = []int{}
			m.Shards[1].Pieces[len(m.Shards[1].Pieces)-1].Key = "other/w"
			delete(m.Tensors, "model/s")
		},
		// Shard files: swapped, duplicated, outside the directory, not
		// files, the manifest itself.
		func(m *Manifest) { m.Shards[0].File, m.Shards[1].File = m.Shards[1].File, m.Shards[0].File },
		func(m *Manifest) { m.Shards = append(m.Shards, m.Shards[1]) },
		func(m *Manifest) { m.Shards[0].File = "../" + ShardFile(0) },
		func(m *Manifest) { m.Shards[0].File = "" },
		func(m *Manifest) { m.Shards[0].File = "." },
		func(m *Manifest) { m.Shards[0].File = ".." },
		func(m *Manifest) { m.Shards[0].File = ManifestFile },
		func(m *Manifest) { m.Shards[0].File = "shard_00007.bin" },
		// Ranks out of order; nulls.
		func(m *Manifest) { m.Ranks[0], m.Ranks[1] = m.Ranks[1], m.Ranks[0] },
		func(m *Manifest) { m.Ranks = nil; m.Args = Args{}; m.GradScaler = nil },
		func(m *Manifest) { m.Tensors = nil; m.Shards = nil },
	} {
		f.Add(edit(mod), true, true)
	}
	f.Add([]byte(`{"format":"gotron-distributed-1","iteration":1,"tensors":{"model/s":null},"shards":[{"file":"shard_00001.bin","rank":1,"bytes":4,"pieces":[{"key":"model/s","offset":null,"shape":null,"pos":0,"crc32c":[0]}]}]}`), true, true)
	f.Add([]byte(`{"format":"gotron-distributed-1","iteration":1,"tensors":{},"shards":[],"ranks":[],"unknown":1}`), true, true)

	dir := f.TempDir()
	iter := IterDir(dir, 1)
	if err := os.MkdirAll(iter, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TrackerFile), []byte("1\n"), 0o644); err != nil {
		f.Fatal(err)
	}

	haveShards := false
	f.Fuzz(func(t *testing.T, manifest []byte, wrap, shards bool) {
		file := manifest
		if wrap {
			file = wrapManifest(manifest)
		}
		if err := os.WriteFile(filepath.Join(iter, ManifestFile), file, 0o644); err != nil {
			t.Fatal(err)
		}
		// Nothing writes the shards but this: they change only with the
		// flag.
		for rank, data := range shardData {
			path := filepath.Join(iter, ShardFile(rank))
			switch {
			case shards == haveShards:
			case shards:
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
		}
		haveShards = shards

		r, err := Open(dir)
		if err != nil {
			if r != nil || !strings.Contains(err.Error(), dir) {
				t.Fatalf("Open: reader %v, error %q (must name %s)", r, err, dir)
			}
			return
		}
		defer r.Close()
		m := r.Manifest
		if m.Format != Format || m.Iteration != 1 {
			t.Fatalf("Open accepted format %q, iteration %d", m.Format, m.Iteration)
		}

		var rep VerifyReport
		var verr error
		alloc := allocated(func() { rep, verr = r.Verify() })
		if limit := uint64(4<<20 + 256*len(file)); alloc > limit {
			t.Fatalf("Verify allocated %d bytes (limit %d) for a %d-byte manifest", alloc, limit, len(file))
		}
		if rep.Verified+rep.Damaged != rep.Blocks || (verr == nil) != (rep.Damaged == 0) && !shardLevelOnly(verr) {
			t.Fatalf("report: %d blocks, %d verified, %d damaged; error %v", rep.Blocks, rep.Verified, rep.Damaged, verr)
		}
		if len(rep.Tensors) != len(m.Tensors) || len(rep.Shards) != len(m.Shards) {
			t.Fatalf("report of %d tensors and %d shards, the manifest has %d and %d", len(rep.Tensors), len(rep.Shards), len(m.Tensors), len(m.Shards))
		}
		if verr != nil {
			for _, line := range strings.Split(verr.Error(), "\n") {
				if !strings.Contains(line, r.Dir) {
					t.Fatalf("Verify: %q does not name the file", line)
				}
			}
		}

		keys := make([]string, 0, len(m.Tensors))
		for k := range m.Tensors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		small, convertible := true, true
		for _, key := range keys {
			shape := m.Tensors[key]
			n, err := numel(shape)
			if err != nil {
				t.Fatalf("Open accepted tensor %s of shape %v: %v", key, shape, err)
			}
			if _, _, ok := wholeName(key); !ok {
				convertible = false
			}
			var nonzero []int
			for _, d := range shape {
				if d != 0 {
					nonzero = append(nonzero, d)
				}
			}
			if _, err := numel(nonzero); err != nil {
				convertible = false // Open accepts it (numel stops at a zero); ToWhole refuses it
			}
			if n > fuzzFillLimit {
				small = false
				continue
			}
			b := Box{Offset: make([]int, len(shape)), Shape: shape}
			dst := make([]float32, n)
			var ferr error
			alloc := allocated(func() { ferr = r.Fill(key, b, dst) })
			if limit := uint64(1<<20 + 16*n + 4096*int64(rep.Tensors[sort.SearchStrings(keys, key)].Pieces)); alloc > limit {
				t.Fatalf("Fill of %s %v allocated %d bytes (limit %d)", key, shape, alloc, limit)
			}
			// (Not r.Dir: Fill cleans the path of a shard the manifest
			// names "..", which then names dir alone.)
			if ferr != nil && !strings.Contains(ferr.Error(), dir) {
				t.Fatalf("Fill of %s: %q does not name the checkpoint", key, ferr)
			}
			if verr == nil && ferr != nil {
				t.Fatalf("the checkpoint verified but %s does not read: %v", key, ferr)
			}
			var de *DamageError
			if errors.As(ferr, &de) && !strings.Contains(verr.Error(), de.Error()) {
				t.Fatalf("Fill found damage Verify did not report: %v\nVerify: %v", ferr, verr)
			}
		}

		var c *Checkpoint
		var cerr error
		alloc = allocated(func() { c, cerr = ToWhole(r) })
		if small && convertible {
			if (cerr == nil) != (verr == nil) {
				t.Fatalf("Verify: %v; ToWhole: %v", verr, cerr)
			}
			if cerr == nil && len(c.Model)+len(c.Optimizer) != len(m.Tensors) {
				t.Fatalf("ToWhole: %d + %d tensors of %d", len(c.Model), len(c.Optimizer), len(m.Tensors))
			}
		}
		var onDisk int64
		for _, s := range rep.Shards {
			onDisk += max(s.Actual, 0)
		}
		if limit := uint64(4<<20 + 24*onDisk*int64(len(m.Tensors)) + int64(256*len(file))); alloc > limit {
			t.Fatalf("ToWhole allocated %d bytes (limit %d) for %d bytes of shards on disk: %v", alloc, limit, onDisk, cerr)
		}
	})
}

// shardLevelOnly reports whether err holds only errors about whole shard
// files (SizeError, ShardError): damage although no block is damaged (a
// shard longer than recorded, a missing shard without pieces).
func shardLevelOnly(err error) bool {
	if err == nil {
		return false
	}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *SizeError
		var he *ShardError
		if !errors.As(e, &se) && !errors.As(e, &he) {
			return false
		}
	}
	return true
}
