package gptdata

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestBuildErrors(t *testing.T) {
	corpus, open, _ := fixtures(t)
	ok := Config{SeqLength: corpus.SeqLength, Seed: 1, Split: "90,8,2", CachePath: t.TempDir(), EOD: corpus.EOD}
	a := Blend{Prefixes: []string{"corpus_a"}}
	for name, c := range map[string]struct {
		cfg   func(*Config)
		blend Blend
		n     [3]int
		err   string
	}{
		"seq":       {func(c *Config) { c.SeqLength = 1 }, a, [3]int{10, 0, 0}, "--seq-length 1"},
		"seed":      {func(c *Config) { c.Seed = 1 << 32 }, a, [3]int{10, 0, 0}, "--seed 4294967296"},
		"split":     {func(c *Config) { c.Split = "x" }, a, [3]int{10, 0, 0}, "--split"},
		"negative":  {nil, a, [3]int{-1, 0, 0}, "-1 train samples"},
		"no prefix": {nil, Blend{}, [3]int{10, 0, 0}, "no dataset prefix"},
		"weights":   {nil, Blend{Prefixes: []string{"corpus_a", "corpus_b"}, Weights: []float64{1}}, [3]int{10, 0, 0}, "1 weights for 2 prefixes"},
		"open":      {nil, Blend{Prefixes: []string{"missing"}}, [3]int{10, 0, 0}, "no dataset missing"},
		"too short": {nil, Blend{Prefixes: []string{"corpus_a", "corpus_b"}}, [3]int{100000, 0, 0}, "the run needs 100000"},
		"empty blend part": {func(c *Config) { c.Split = "969,30,1" }, Blend{Prefixes: []string{"corpus_a", "corpus_b"}}, [3]int{0, 0, 5},
			"the test split of corpus_b (documents [150, 150) of 150): no documents: each dataset of a blend gives every split its own share of its documents: give the split a larger share with --split, or leave the dataset out of the blend, or drop the test split's share from --split"},
	} {
		cfg := ok
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		_, err := Build(cfg, c.blend, c.n, open)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one with %q", name, err, c.err)
		}
	}
	if _, err := BuildPerSplit(ok, [3]Blend{a}, [3]int{10, 0, 0}, open); err == nil || !strings.Contains(err.Error(), "--split") {
		t.Errorf("BuildPerSplit with --split: error %v", err)
	}
	// A single prefix whose test share is empty gives no test dataset.
	cfg := ok
	cfg.Split = "969,30,1"
	ds, err := Build(cfg, Blend{Prefixes: []string{"corpus_b"}}, [3]int{10, 10, 10}, open)
	if err != nil || ds[0] == nil || ds[1] == nil || ds[2] != nil {
		t.Errorf("corpus_b split 969,30,1: %v, %v; want train and valid, no test", ds, err)
	}
}

// corruptCase builds case single into a directory the registry has not
// seen and returns it with its train document index file.
func corruptCase(t *testing.T) (string, func() error, string) {
	corpus, open, cases := fixtures(t)
	c := &cases[0]
	first := t.TempDir()
	c.build(t, corpus, open, first)
	dir := t.TempDir()
	copyDir(t, first, dir)
	files, _ := filepath.Glob(filepath.Join(dir, "*-GPTDataset-train-document_index.npy"))
	if len(files) != 1 {
		t.Fatal(files)
	}
	build := func() error {
		blend, _ := ParseBlend(c.DataPath)
		_, err := Build(c.config(corpus.SeqLength, corpus.EOD, dir), blend, c.NumSamples, open)
		return err
	}
	return dir, build, files[0]
}

func TestCorruptCache(t *testing.T) {
	for name, damage := range map[string]func(string) error{
		"truncated": func(f string) error { return os.Truncate(f, 100) },
		"document id past the dataset": func(f string) error {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			b[len(b)-4], b[len(b)-3], b[len(b)-2], b[len(b)-1] = 0xff, 0xff, 0xff, 0x7f // a document id past the dataset
			return os.WriteFile(f, b, 0o644)
		},
		"description": func(f string) error {
			d := strings.TrimSuffix(f, "document_index.npy") + "description.txt"
			return os.WriteFile(d, []byte("{}"), 0o644)
		},
	} {
		_, build, file := corruptCase(t)
		if err := damage(file); err != nil {
			t.Fatal(err)
		}
		err := build()
		if err == nil || !strings.Contains(err.Error(), strings.TrimSuffix(file, "document_index.npy")) || !strings.Contains(err.Error(), "delete") {
			t.Errorf("%s: error %v, want one naming the file and asking to delete it", name, err)
		}
	}
}

// TestPartialCacheIsRebuilt: a cache without one of its files (a writer
// that died) is built and written again.
func TestPartialCacheIsRebuilt(t *testing.T) {
	_, build, file := corruptCase(t)
	shuffle := strings.TrimSuffix(file, "document_index.npy") + "shuffle_index.npy"
	if err := os.Remove(shuffle); err != nil {
		t.Fatal(err)
	}
	if err := build(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shuffle); err != nil {
		t.Errorf("not rewritten: %v", err)
	}
	tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(file), "*.tmp*"))
	if len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// TestChangedDataset: indices shared in the process (or cached) for a prefix
// whose data changed are refused.
func TestChangedDataset(t *testing.T) {
	corpus, open, cases := fixtures(t)
	c := &cases[0]
	dir := t.TempDir()
	keep := c.build(t, corpus, open, dir) // holds the registry's arrays
	cp := corpus.Corpora["corpus_a"]
	lengths := append([]int32(nil), cp.Lengths...)
	lengths[0], lengths[1] = lengths[0]+lengths[1], 0 // same tokens, other documents
	changed := newMemSource("corpus_a", lengths, cp.Tokens)
	blend, _ := ParseBlend(c.DataPath)
	_, err := Build(c.config(corpus.SeqLength, corpus.EOD, dir), blend, c.NumSamples, func(string) (Source, error) { return changed, nil })
	if err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("error %v, want one saying the indices do not fit", err)
	}
	runtime.KeepAlive(keep)
}
