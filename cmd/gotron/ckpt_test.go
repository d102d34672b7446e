package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/train"
)

// ckptArgs are the tiny model of train's mockArgs, 3 iterations on 2
// tensor-parallel ranks.
func ckptArgs() train.Args {
	a := train.DefaultArgs()
	a.Model.NumLayers, a.Model.HiddenSize, a.Model.NumAttentionHeads = 2, 32, 4
	a.Model.SeqLength, a.Model.VocabSize = 16, 64
	a.Model.HiddenDropout, a.Model.AttentionDropout = 0, 0
	a.MicroBatchSize, a.GlobalBatchSize, a.TrainIters = 1, 8, 3
	a.LR, a.LRWarmupIters, a.LRDecayStyle, a.MinLR = 3e-3, 2, "cosine", 3e-4
	a.LRDecayIters = 10 // fixed, so that a resume may train longer (the schedule is checked)
	a.MockData = true
	a.EvalIters = 0
	a.WorldSize = 2
	a.Model.TensorModelParallelSize = 2
	return a
}

// trainCheckpoint trains ckptArgs and returns the --save directory,
// holding the distributed checkpoint of iteration 3 (two shards).
func trainCheckpoint(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	a := ckptArgs()
	a.Save = dir
	if _, err := train.Run(context.Background(), a, train.Options{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyDir copies the checkpoint directory src (files and iteration
// directories) to a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// flipBit flips one bit of the file at byte at.
func flipBit(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x08
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// openManifest returns the manifest of dir's latest iteration.
func openManifest(t *testing.T, dir string) *ckpt.Manifest {
	t.Helper()
	r, err := ckpt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return r.Manifest
}

// TestCkptInspectAndConvert trains a checkpoint on two tensor-parallel
// ranks, then: inspect lists and verifies its two shards (as text and
// JSON); a flipped bit in a shard, and one in the manifest, make inspect
// fail naming the file (and the tensor and piece); converting to the
// whole-tensor form and back gives a checkpoint from which training
// resumes at iteration 3 with the same losses, bit for bit, as from the
// original.
func TestCkptInspectAndConvert(t *testing.T) {
	dir := trainCheckpoint(t)
	m := openManifest(t, dir)
	blocks := 0
	for _, s := range m.Shards {
		for _, p := range s.Pieces {
			blocks += len(p.CRC)
		}
	}

	t.Run("inspect", func(t *testing.T) {
		out, err := run(t, "ckpt", "inspect", dir)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		shards := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "shard_0000") {
				shards++
			}
		}
		for _, w := range []string{"iteration   3", "gotron-distributed-1", "world 2: tp 2, pp 1, vpp 1, cp 1, dp 1", "consumed samples 24, optimizer steps 3, loss scaler none",
			"global_batch_size=8", "hidden_size=32", ckpt.ShardFile(0), ckpt.ShardFile(1),
			"optimizer/exp_avg_sq/embedding.word_embeddings.weight", "in 2 shards",
			"all " + itoa(blocks) + " blocks of 2 shards verified"} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		if shards != 2 {
			t.Errorf("%d shard lines, want 2:\n%s", shards, out)
		}
		fc1 := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			fc1 = fc1 || len(f) == 4 && f[0] == "model/decoder.layers.0.mlp.linear_fc1.weight" && f[1]+" "+f[2] == "[128 32]" && f[3] == "2"
		}
		if !fc1 {
			t.Errorf("no line lists linear_fc1 of layer 0 with shape [128 32] in 2 pieces:\n%s", out)
		}
		if _, err := run(t, "ckpt", "inspect", dir, "--iteration", "3"); err != nil {
			t.Errorf("--iteration 3: %v", err)
		}
		if _, err := run(t, "ckpt", "inspect", dir, "--iteration", "2"); err == nil || !strings.Contains(err.Error(), "no iteration 2") || strings.HasPrefix(err.Error(), "--load") {
			t.Errorf("--iteration 2 (not saved): %v", err)
		}
	})

	t.Run("json", func(t *testing.T) {
		out, err := run(t, "ckpt", "inspect", dir, "--json")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var doc struct {
			Manifest ckpt.Manifest `json:"manifest"`
			Verify   struct {
				OK       bool     `json:"ok"`
				Damage   []string `json:"damage"`
				Blocks   int      `json:"blocks"`
				Verified int      `json:"verified"`
				Shards   []ckpt.ShardReport
			} `json:"verify"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !reflect.DeepEqual(&doc.Manifest, m) {
			t.Errorf("the JSON manifest differs from the checkpoint's")
		}
		if !doc.Verify.OK || len(doc.Verify.Damage) != 0 || doc.Verify.Blocks != blocks || doc.Verify.Verified != blocks || len(doc.Verify.Shards) != 2 {
			t.Errorf("verify %+v", doc.Verify)
		}
	})

	t.Run("flipped bit in a shard", func(t *testing.T) {
		d := copyDir(t, dir)
		// The middle byte of rank 1's middle piece.
		s := m.Shards[1]
		p := s.Pieces[len(s.Pieces)/2]
		flipBit(t, filepath.Join(ckpt.IterDir(d, 3), s.File), p.Pos+2*int64(p.Box.Numel()))
		out, err := run(t, "ckpt", "inspect", d)
		if err == nil {
			t.Fatalf("a flipped bit verified:\n%s", out)
		}
		for _, w := range []string{s.File + " is damaged: tensor " + p.Key + ", piece " + p.Box.String(), "1 of " + itoa(blocks) + " checksum blocks damaged"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q:\n%v", w, err)
			}
		}
		if strings.Contains(out, "verified") {
			t.Errorf("output says verified:\n%s", out)
		}
		out, err = run(t, "ckpt", "inspect", d, "--json")
		var doc struct {
			Verify struct {
				OK     bool     `json:"ok"`
				Damage []string `json:"damage"`
			} `json:"verify"`
		}
		if err == nil || json.Unmarshal([]byte(out), &doc) != nil || doc.Verify.OK || len(doc.Verify.Damage) != 1 || !strings.Contains(doc.Verify.Damage[0], p.Key) {
			t.Errorf("--json: %v, %+v\n%s", err, doc, out)
		}
		if _, err := run(t, "ckpt", "convert", "--to-whole", d, filepath.Join(t.TempDir(), "w")); err == nil || !strings.Contains(err.Error(), s.File) {
			t.Errorf("converting a damaged checkpoint: %v", err)
		}
	})

	t.Run("flipped bit in the manifest", func(t *testing.T) {
		d := copyDir(t, dir)
		flipBit(t, filepath.Join(ckpt.IterDir(d, 3), ckpt.ManifestFile), 300)
		_, err := run(t, "ckpt", "inspect", d)
		if err == nil || !strings.Contains(err.Error(), ckpt.ManifestFile+" is damaged") {
			t.Errorf("got %v, want an error naming %s", err, ckpt.ManifestFile)
		}
	})

	t.Run("convert errors", func(t *testing.T) {
		w := filepath.Join(t.TempDir(), "w")
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{dir, w}, "exactly one of --to-whole"},
			{[]string{"--to-whole", "--from-whole", dir, w}, "exactly one of --to-whole"},
			{[]string{"--to-whole", dir, dir + "/"}, "converting in place"},
			{[]string{"--from-whole", dir, w}, "holds a distributed checkpoint: use --to-whole"},
			{[]string{"--to-whole", filepath.Join(t.TempDir(), "none"), w}, "holds no gotron checkpoint"},
			{[]string{"--to-whole", dir}, "accepts 2 arg(s)"},
		} {
			if _, err := run(t, append([]string{"ckpt", "convert"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v, want %q", c.args, err, c.want)
			}
		}
	})

	t.Run("convert and resume", func(t *testing.T) {
		whole := filepath.Join(t.TempDir(), "whole")
		back := filepath.Join(t.TempDir(), "back")
		if out, err := run(t, "ckpt", "convert", "--to-whole", dir, whole); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if _, err := ckpt.Load(whole); err != nil {
			t.Fatal(err)
		}
		if _, err := run(t, "ckpt", "convert", "--to-whole", whole, filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "use --from-whole") {
			t.Errorf("--to-whole of a whole-tensor checkpoint: %v", err)
		}
		if out, err := run(t, "ckpt", "convert", "--from-whole", whole, back); err != nil || !strings.Contains(out, "generator states of 2 ranks") {
			t.Fatalf("%v\n%s", err, out)
		}
		if _, err := run(t, "ckpt", "convert", "--from-whole", whole, back); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("converting into a DST that holds the iteration: %v", err)
		}
		out, err := run(t, "ckpt", "inspect", back)
		if err != nil || !strings.Contains(out, "of 1 shards verified") {
			t.Fatalf("%v\n%s", err, out)
		}
		// The state, arguments, layout and generators are the original's.
		mb := openManifest(t, back)
		orig := *m
		orig.Layout.DistributedOptimizer = false // not recorded by the whole-tensor form
		for _, x := range []*ckpt.Manifest{&orig, mb} {
			x.Shards = nil
		}
		if !reflect.DeepEqual(*mb, orig) {
			t.Errorf("converted manifest\n%+v\nwant\n%+v", *mb, orig)
		}

		resume := func(load string) []float64 {
			a := ckptArgs()
			a.Load, a.TrainIters = load, 5
			res, err := train.Run(context.Background(), a, train.Options{Out: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			if res.StartIteration != 3 || len(res.Losses) != 2 {
				t.Fatalf("--load %s: started at %d with %d losses, want 3 and 2", load, res.StartIteration, len(res.Losses))
			}
			return res.Losses
		}
		want, got := resume(dir), resume(back)
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Errorf("iteration %d: loss %.17g from the converted checkpoint, %.17g from the original", 4+i, got[i], want[i])
			}
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCkptInspectNamesStaleSaves: what an interrupted save left beside
// the checkpoint is named, with what becomes of it, in text and JSON.
func TestCkptInspectNamesStaleSaves(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	a := ckptArgs()
	a.Save = dir
	if _, err := train.Run(context.Background(), a, train.Options{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "iter_0000009.tmp-00ff"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "ckpt", "inspect", dir)
	if err != nil || !strings.Contains(out, "note: interrupted saves left iter_0000009.tmp-00ff; not part of any checkpoint, the next save into") {
		t.Errorf("text: %v\n%s", err, out)
	}
	out, err = run(t, "ckpt", "inspect", dir, "--json")
	if err != nil || !strings.Contains(out, `"stale": [`) {
		t.Errorf("JSON: %v\n%s", err, out)
	}
}
