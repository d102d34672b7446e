package data

import (
	"bytes"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func testCorpus() *Corpus {
	return &Corpus{Source: "test", Docs: []Document{
		{"a.go", []byte("package a\n\nfunc A() int { return 1 }\n")},
		{"b.go", []byte("package b\n")},
		{"c.go", []byte("package c // ünïcode\n\nvar C = \"c\"\n")},
	}}
}

func TestTextDatasetWindows(t *testing.T) {
	c := testCorpus()
	stream := c.Stream()
	for _, seq := range []int{1, 4, 7, len(stream) - 1} {
		d, err := NewTextDataset(c, seq, 1)
		if err != nil {
			t.Fatal(err)
		}
		n := d.NumSamples()
		if n != (len(stream)-1)/seq {
			t.Fatalf("seq %d: %d samples from %d tokens", seq, n, len(stream))
		}
		// The windows' first seq tokens tile the stream, and each window's last token starts
		// the next one.
		var rebuilt []byte
		for k := 0; k < n; k++ {
			w := d.Sample(k)
			if len(w) != seq+1 {
				t.Fatalf("sample %d has %d tokens", k, len(w))
			}
			rebuilt = append(rebuilt, w[:seq]...)
			if k+1 < n && w[seq] != d.Sample(k + 1)[0] {
				t.Errorf("sample %d does not end where %d starts", k, k+1)
			}
		}
		if last := d.Sample(n - 1); !bytes.Equal(append(rebuilt, last[seq]), stream[:n*seq+1]) {
			t.Errorf("seq %d: windows do not reconstruct the stream", seq)
		}
	}
}

func TestTextDatasetOrderAndBatch(t *testing.T) {
	c := testCorpus()
	const seq, seed, rowsTotal = 5, 11, 3
	d, err := NewTextDataset(c, seq, seed)
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Stream()
	n := d.NumSamples()
	steps := 3*n/rowsTotal + 2 // more than three epochs
	counts := map[int]int{}
	for step := 0; step < steps; step++ {
		b := d.Batch(ConstantStep(step, rowsTotal), 0, rowsTotal)
		for g := 0; g < rowsTotal; g++ {
			i := step*rowsTotal + g
			want := refPermutation(n, seed+uint64(i/n))[i%n]
			if got := d.SampleIndex(ConstantStep(step, rowsTotal), g); got != want {
				t.Fatalf("step %d row %d: sample %d, want %d", step, g, got, want)
			}
			if i < 3*n {
				counts[want]++
			}
			win := stream[want*seq : want*seq+seq+1]
			for s := 0; s < seq; s++ {
				if b.InputIDs[g*seq+s] != int32(win[s]) || b.Labels[g*seq+s] != int32(win[s+1]) || b.LossMask[g*seq+s] != 1 {
					t.Fatalf("step %d row %d position %d: ids/labels/mask %d/%d/%v, window %q",
						step, g, s, b.InputIDs[g*seq+s], b.Labels[g*seq+s], b.LossMask[g*seq+s], win)
				}
			}
		}
	}
	// Every epoch visits every sample exactly once.
	for k := 0; k < n; k++ {
		if counts[k] != 3 {
			t.Errorf("sample %d seen %d times in 3 epochs", k, counts[k])
		}
	}
	// Epochs are ordered differently.
	if reflect.DeepEqual(refPermutation(n, seed), refPermutation(n, seed+1)) {
		t.Error("epochs 0 and 1 have the same order")
	}
	for step := 0; step < steps; step++ {
		checkSplitInvariance(t, d, step, 6)
	}
}

func TestTextDatasetEODMaskLoss(t *testing.T) {
	c := testCorpus()
	d, err := NewTextDataset(c, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.EODMaskLoss = true
	b := d.Batch(ConstantStep(0, d.NumSamples()), 0, d.NumSamples())
	masked := 0
	for i, id := range b.InputIDs {
		if want := float32(1); id == EndOfDocument {
			want = 0
			masked++
			if b.LossMask[i] != want {
				t.Errorf("position %d: input EOD, mask %v", i, b.LossMask[i])
			}
		} else if b.LossMask[i] != want {
			t.Errorf("position %d: input %d, mask %v", i, id, b.LossMask[i])
		}
	}
	if masked == 0 {
		t.Error("no end-of-document input in a whole epoch")
	}
}

func TestTextDatasetConcurrent(t *testing.T) {
	d, err := NewTextDataset(testCorpus(), 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := NewTextDataset(testCorpus(), 3, 5)
	const ranks, steps = 4, 40
	var wg sync.WaitGroup
	got := make([][]Batch, ranks)
	for r := 0; r < ranks; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := 0; s < steps; s++ {
				got[r] = append(got[r], d.Batch(ConstantStep(s, 2*ranks), 2*r, 2))
			}
		}()
	}
	wg.Wait()
	for r := 0; r < ranks; r++ {
		for s := 0; s < steps; s++ {
			if want := serial.Batch(ConstantStep(s, 2*ranks), 2*r, 2); !reflect.DeepEqual(got[r][s], want) {
				t.Fatalf("rank %d step %d differs from a serial run", r, s)
			}
		}
	}
}

func TestTextDatasetErrors(t *testing.T) {
	c := &Corpus{Source: "tiny", Docs: []Document{{"a", []byte("abc")}}}
	if _, err := NewTextDataset(c, 4, 0); err == nil || !strings.Contains(err.Error(), "the corpus has 4 tokens (3 bytes and 1 end-of-document tokens) but one sample needs seq+1 = 5") {
		t.Errorf("short corpus: %v", err)
	}
	if d, err := NewTextDataset(c, 3, 0); err != nil || d.NumSamples() != 1 {
		t.Errorf("corpus of exactly seq+1 tokens: %v", err)
	}
	if _, err := NewTextDataset(c, 0, 0); err == nil {
		t.Error("seq 0 accepted")
	}
}

func TestGoRootCorpus(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not installed")
	}
	c, err := GoRootCorpus()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Docs) <= 1000 {
		t.Errorf("%d Go files, want more than 1000", len(c.Docs))
	}
	found := false
	for _, d := range c.Docs {
		if !strings.HasPrefix(d.Name, "src/") || !strings.HasSuffix(d.Name, ".go") || strings.Contains(d.Name, "/testdata/") {
			t.Fatalf("document %q", d.Name)
		}
		if d.Name == "src/fmt/print.go" {
			found = true
		}
	}
	if !found {
		t.Error("src/fmt/print.go not in the corpus")
	}
	if len(c.Skipped) != 0 {
		t.Errorf("Go files with NUL bytes: %v", c.Skipped)
	}
	train, valid := c.Split(0.01, 1234)
	if len(valid.Docs) == 0 || len(train.Docs) < 10*len(valid.Docs) {
		t.Errorf("split into %d train and %d valid files", len(train.Docs), len(valid.Docs))
	}
}

// TestTextDatasetRampedSteps: under a batch-size ramp a step's rows are
// the samples after those consumed, whatever the step's index and size:
// steps of 2, 2, 4 and 8 rows read the samples a constant batch of 1 does.
func TestTextDatasetRampedSteps(t *testing.T) {
	d, err := NewTextDataset(testCorpus(), 5, 11)
	if err != nil {
		t.Fatal(err)
	}
	var consumed int64
	for i, rows := range []int{2, 2, 4, 8} {
		step := Step{Index: i, Rows: rows, Consumed: consumed}
		for g := 0; g < rows; g++ {
			k := int(consumed) + g
			if got, want := d.SampleIndex(step, g), d.SampleIndex(ConstantStep(k, 1), 0); got != want {
				t.Fatalf("step %+v row %d: sample %d, want sample %d of the run (%d)", step, g, got, k, want)
			}
		}
		consumed += int64(rows)
	}
}
