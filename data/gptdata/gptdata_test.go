package gptdata

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// compareSamples checks a built split against the fixture's.
func compareSamples(t *testing.T, name string, d Dataset, want *splitFile) {
	t.Helper()
	if (d == nil) != (want == nil) {
		t.Fatalf("%s: dataset %v, reference %v", name, d != nil, want != nil)
	}
	if d == nil {
		return
	}
	if d.Len() != want.Len {
		t.Fatalf("%s: %d samples, reference %d", name, d.Len(), want.Len)
	}
	switch x := d.(type) {
	case *gptDataset:
		if want.Kind != "GPT" {
			t.Fatalf("%s: a GPTDataset, reference %s", name, want.Kind)
		}
		docs := map[int32]bool{}
		for _, v := range x.idx.doc.i32 {
			docs[v] = true
		}
		if x.idx.doc.size() != want.Epochs*len(docs) {
			t.Errorf("%s: document index of %d entries, %d documents, the reference's %d epochs", name, x.idx.doc.size(), len(docs), want.Epochs)
		}
	case *blendedDataset:
		if want.Kind != "Blended" {
			t.Fatalf("%s: a BlendedDataset, reference %s", name, want.Kind)
		}
	}
	for i, tok := range want.Tokens {
		s := d.Sample(i)
		if !slices.Equal(s.Tokens, tok) {
			t.Fatalf("%s: sample %d tokens\n%v\nreference\n%v", name, i, s.Tokens, tok)
		}
		if want.LossMask != nil && i < len(want.LossMask) {
			if !slices.Equal(s.LossMask, want.LossMask[i]) {
				t.Fatalf("%s: sample %d loss mask %v, reference %v", name, i, s.LossMask, want.LossMask[i])
			}
			if (s.PositionIDs == nil) != (want.PositionIDs == nil) || (s.Segments == nil) != (want.Segments == nil) {
				t.Fatalf("%s: sample %d has position ids %v and segments %v, the reference %v and %v",
					name, i, s.PositionIDs != nil, s.Segments != nil, want.PositionIDs != nil, want.Segments != nil)
			}
			if want.PositionIDs != nil && !slices.Equal(s.PositionIDs, want.PositionIDs[i]) {
				t.Fatalf("%s: sample %d position ids %v, reference %v", name, i, s.PositionIDs, want.PositionIDs[i])
			}
			if want.Segments != nil && !slices.Equal(s.Segments, want.Segments[i]) {
				t.Fatalf("%s: sample %d segments %v, reference %v", name, i, s.Segments, want.Segments[i])
			}
		}
	}
}

// compareFiles checks that dir holds exactly the case's cache files, with
// the reference's bytes.
func compareFiles(t *testing.T, c *caseFile, dir string) {
	t.Helper()
	want := map[string]string{}
	for _, s := range c.Splits {
		if s != nil {
			for _, f := range s.Files {
				want[f.Name] = f.Sha256
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if h, ok := want[e.Name()]; ok && h != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: %s differs from the reference's bytes", c.Name, e.Name())
		}
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	sort.Strings(got)
	if !slices.Equal(got, names) {
		t.Errorf("%s: cache files\n%s\nreference\n%s", c.Name, strings.Join(got, "\n"), strings.Join(names, "\n"))
	}
}

// TestReferenceCases builds every case of cases.json and compares the
// samples (the first 100 of each train split, 32 of the others, masks of
// the first 24) and the cache files' names and bytes with the reference's.
func TestReferenceCases(t *testing.T) {
	corpus, open, cases := fixtures(t)
	for i := range cases {
		c := &cases[i]
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			ds := c.build(t, corpus, open, dir)
			for s := range 3 {
				compareSamples(t, c.Name+"/"+splitNames[s], ds[s], c.Splits[s])
			}
			compareFiles(t, c, dir)
		})
	}
}

// TestFirstHundredTrainingSamples is the requirement, spelled out:
// one prefix, seed 1234, split 969,30,1, the first 100 training samples.
func TestFirstHundredTrainingSamples(t *testing.T) {
	corpus, open, cases := fixtures(t)
	c := &cases[0]
	if c.Name != "single" || len(c.Splits[0].Tokens) != 100 || *c.Split != "969,30,1" || c.Seed != 1234 {
		t.Fatalf("case 0 is %s with %d samples, want single with 100", c.Name, len(c.Splits[0].Tokens))
	}
	ds := c.build(t, corpus, open, t.TempDir())
	for i, want := range c.Splits[0].Tokens {
		if got := ds[0].Sample(i).Tokens; !slices.Equal(got, want) {
			t.Fatalf("training sample %d: %v, reference %v", i, got, want)
		}
	}
}

// TestNumSamplesMatchesReference compares NumSamples with the counts the
// reference derives from the run of the cases that give one.
func TestNumSamplesMatchesReference(t *testing.T) {
	_, _, cases := fixtures(t)
	n := 0
	for _, c := range cases {
		if c.Run == nil {
			continue
		}
		n++
		got, err := NumSamples(c.Run.TrainIters, c.Run.GlobalBatchSize, c.Run.EvalInterval, c.Run.EvalIters)
		if err != nil || got != c.NumSamples {
			t.Errorf("%s: NumSamples = %v, %v; reference %v", c.Name, got, err, c.NumSamples)
		}
	}
	if n == 0 {
		t.Fatal("no case gives a run")
	}
	if _, err := NumSamples(10, 8, 0, 2); err == nil {
		t.Error("NumSamples with eval interval 0: no error")
	}
}

// statDir returns the FileInfo of every file of dir.
func statDir(t *testing.T, dir string) map[string]os.FileInfo {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]os.FileInfo{}
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi
	}
	return out
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCacheReuse builds every case, copies its cache to a new directory
// (so that the process registry misses) and builds again: the files are
// loaded, not rewritten, and the samples are the reference's.
func TestCacheReuse(t *testing.T) {
	corpus, open, cases := fixtures(t)
	for i := range cases {
		c := &cases[i]
		first := t.TempDir()
		c.build(t, corpus, open, first)
		dir := t.TempDir()
		copyDir(t, first, dir)
		before := statDir(t, dir)
		ds := c.build(t, corpus, open, dir)
		after := statDir(t, dir)
		if len(after) != len(before) {
			t.Fatalf("%s: %d cache files after the second build, %d before", c.Name, len(after), len(before))
		}
		for n, fi := range before {
			if !os.SameFile(fi, after[n]) {
				t.Errorf("%s: %s was rewritten, not loaded", c.Name, n)
			}
		}
		for s := range 3 {
			compareSamples(t, c.Name+"/"+splitNames[s]+" (cached)", ds[s], c.Splits[s])
		}
	}
}

// TestLoadsNumpyWrittenCache loads the index files numpy.save wrote for case
// single.
func TestLoadsNumpyWrittenCache(t *testing.T) {
	corpus, open, cases := fixtures(t)
	c := &cases[0]
	dir := t.TempDir()
	copyDir(t, "testdata/cache_single", dir)
	before := statDir(t, dir)
	if len(before) != 12 {
		t.Fatalf("testdata/cache_single holds %d files, want 12", len(before))
	}
	ds := c.build(t, corpus, open, dir)
	for n, fi := range statDir(t, dir) {
		if !os.SameFile(fi, before[n]) {
			t.Errorf("%s was written, not loaded", n)
		}
	}
	for s := range 3 {
		compareSamples(t, "single/"+splitNames[s]+" (numpy's files)", ds[s], c.Splits[s])
	}
}

// TestConcurrentBuild builds one case from several goroutines into one
// empty cache directory: each gets the reference's samples, they share the
// arrays, and no temporary file is left.
func TestConcurrentBuild(t *testing.T) {
	corpus, open, cases := fixtures(t)
	c := &cases[5] // blend_weighted: blends and their parts
	dir := t.TempDir()
	const ranks = 4
	var got [ranks][3]Dataset
	var errs [ranks]error
	cfg := c.config(corpus.SeqLength, corpus.EOD, dir)
	blend, err := ParseBlend(c.DataPath)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() {
			got[r], errs[r] = Build(cfg, blend, c.NumSamples, open)
			if errs[r] == nil { // every rank reads samples of the shared indices
				for i := range c.Splits[0].Tokens {
					if s := got[r][0].Sample(i); !slices.Equal(s.Tokens, c.Splits[0].Tokens[i]) {
						errs[r] = fmt.Errorf("sample %d differs from the reference's", i)
					}
				}
			}
		})
	}
	wg.Wait()
	for r := range ranks {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		for s := range 3 {
			compareSamples(t, c.Name+"/"+splitNames[s], got[r][s], c.Splits[s])
		}
		if got[r][0].(*blendedDataset).parts[0].idx != got[0][0].(*blendedDataset).parts[0].idx {
			t.Errorf("rank %d: its own copy of the indices", r)
		}
	}
	compareFiles(t, c, dir)
}

// TestDefaultCachePath: without --data-cache-path a GPTDataset's indices go
// to <prefix>/cache/GPTDataset_indices, and blends are not cached.
func TestDefaultCachePath(t *testing.T) {
	corpus, _, cases := fixtures(t)
	root := t.TempDir()
	srcs := map[string]Source{}
	for name, cp := range corpus.Corpora {
		srcs[name] = newMemSource(filepath.Join(root, name), cp.Lengths, cp.Tokens)
	}
	open := func(p string) (Source, error) { return srcs[filepath.Base(p)], nil }
	c := &cases[5]
	cfg := c.config(corpus.SeqLength, corpus.EOD, "")
	blend, err := ParseBlend(c.DataPath)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Build(cfg, blend, c.NumSamples, open)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Len() != c.Splits[0].Len {
		t.Fatalf("%d samples, reference %d", ds[0].Len(), c.Splits[0].Len)
	}
	for _, name := range []string{"corpus_a", "corpus_b"} {
		files, err := filepath.Glob(filepath.Join(root, name, "cache", "GPTDataset_indices", "*-GPTDataset-*"))
		if err != nil || len(files) != 8 { // train and valid, four files each
			t.Errorf("%s: cache files %v, %v; want 8", name, files, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(root, "*", "cache", "*", "*Blended*")); len(m) != 0 {
		t.Errorf("blend cached without --data-cache-path: %v", m)
	}
}
