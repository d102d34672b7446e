package train

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotron/gotron/data/indexed"
	"github.com/gotron/gotron/data/tokenizer"
)

// The end-to-end tests of training on indexed data (--data-path): resuming
// continues with the next sample, with and without the document flags, and
// the parallel layouts agree on packed documents.

// indexedVocab is the vocabulary of the synthetic datasets; with
// --tokenizer-type NullTokenizer --vocab-size 64 the end-of-document id is
// the last id, 63 (Megatron-Core's NullTokenizer).
const indexedVocab = 64

// indexedEOD is NullTokenizer's end of document for indexedVocab.
const indexedEOD = indexedVocab - 1

// writeIndexedDocs writes a synthetic indexed dataset in a new temporary
// directory with indexed.Writer and returns its prefix: n documents of 0 to
// maxLen tokens in [0, indexedEOD), each followed by indexedEOD, as
// preprocess --append-eod writes them (one sequence per document).
func writeIndexedDocs(t *testing.T, seed uint64, n, maxLen int) string {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "docs_text_document")
	w, err := indexed.Create(prefix, indexed.Uint16)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for range n {
		doc := make([]int32, r.IntN(maxLen+1), maxLen+1)
		for i := range doc {
			doc[i] = int32(r.IntN(indexedEOD))
		}
		if err := w.AddDocument(append(doc, indexedEOD), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return prefix
}

// indexedArgs is mockArgs (2 layers, width 32, sequence 16, 8 samples per
// iteration) on the indexed dataset prefix, split 80,20,0, evaluated on one
// batch every 3 iterations, the learning rate decaying over 6 iterations
// whatever --train-iters. With docs it sets --reset-position-ids
// --reset-attention-mask --eod-mask-loss and NullTokenizer, whose end of
// document is indexedEOD.
func indexedArgs(prefix string, iters int, docs bool) Args {
	a := mockArgs(iters)
	a.MockData = false
	a.DataPath, a.Split = []string{prefix}, "80,20,0"
	a.EvalIters, a.EvalInterval = 1, 3
	a.LRDecayIters = 6
	a.Model.VocabSize = indexedVocab
	if docs {
		setDocumentFlags(&a)
	}
	return a
}

// setDocumentFlags sets --reset-position-ids --reset-attention-mask
// --eod-mask-loss --tokenizer-type NullTokenizer.
func setDocumentFlags(a *Args) {
	a.ResetPositionIDs, a.ResetAttentionMask, a.EODMaskLoss = true, true, true
	a.Tokenizer = tokenizer.Options{Type: tokenizer.TypeNull}
}

// TestIndexedResumeContinuesData: on an indexed dataset, 3 iterations saved
// with --save and resumed with --load for 3 more give bit for bit the
// losses (and the last validation loss) of 6 uninterrupted iterations: the
// checkpoint's consumed samples put the resumed run on the next sample of
// the same sample order. Also with the document flags, whose run differs
// from the plain one (the flags reach the model and the loss).
func TestIndexedResumeContinuesData(t *testing.T) {
	// 300 documents of 1 to 41 tokens, about 6300: the 80 % training share
	// holds one epoch of the 48 samples of 17 tokens 6 iterations read, the
	// validation share the 24 its evaluations ask for, so the 3- and
	// 6-iteration runs build the same sample order.
	prefix := writeIndexedDocs(t, 1, 300, 40)
	var plain []float64
	for _, docs := range []bool{false, true} {
		t.Run(fmt.Sprintf("document-flags=%v", docs), func(t *testing.T) {
			full := mustRun(t, indexedArgs(prefix, 6, docs))
			if len(full.Losses) != 6 {
				t.Fatalf("%d losses, want 6", len(full.Losses))
			}
			dir := t.TempDir()
			first := indexedArgs(prefix, 3, docs)
			first.Save = dir
			if r := mustRun(t, first); r.Saved != 3 {
				t.Fatalf("the 3-iteration run saved iteration %d", r.Saved)
			}
			second := indexedArgs(prefix, 6, docs)
			second.Load = dir
			res := mustRun(t, second)
			if res.StartIteration != 3 || len(res.Losses) != 3 {
				t.Fatalf("resumed at %d with %d losses, want 3 and 3", res.StartIteration, len(res.Losses))
			}
			for i, l := range res.Losses {
				if l != full.Losses[3+i] {
					t.Errorf("iteration %d: resumed loss %.9f, uninterrupted %.9f", 4+i, l, full.Losses[3+i])
				}
			}
			if res.ValidLoss != full.ValidLoss {
				t.Errorf("validation loss after 6 iterations: resumed %.9f, uninterrupted %.9f", res.ValidLoss, full.ValidLoss)
			}
			if !docs {
				plain = full.Losses
			} else if plain != nil && plain[0] == full.Losses[0] {
				t.Errorf("the first loss with the document flags equals the plain run's, %.9f: the flags changed nothing", plain[0])
			}
		})
	}
}

// TestIndexedDocumentsMatchSingleRank: on indexed data with
// --reset-position-ids --reset-attention-mask --eod-mask-loss, DP 2, TP 2
// with sequence parallelism and CP 2 give the one-rank losses (4
// iterations and the validation loss) to 1e-6 relative and its first-step
// gathered gradients to 1e-5 (‖g − g₁‖/‖g₁‖ per parameter). The one-rank
// gradients without the flags differ by more than 1e-3 for some parameter:
// the samples' position ids, segments and loss mask are used.
func TestIndexedDocumentsMatchSingleRank(t *testing.T) {
	prefix := writeIndexedDocs(t, 2, 200, 40)
	args := func(world int, docs bool) Args {
		a := tpArgs(world, 1)
		a.MockData = false
		a.DataPath = []string{prefix}
		a.Model.VocabSize, a.Model.SeqLength = indexedVocab, 32
		a.TrainIters, a.EvalIters = 4, 1
		if docs {
			setDocumentFlags(&a)
		}
		return a
	}
	wantLoss, wantGrads := tpRun(t, args(1, true))
	if _, plain := tpRun(t, args(1, false)); worstGradDiff(t, plain, wantGrads) < 1e-3 {
		t.Fatal("the first-step gradients with the document flags are within 1e-3 of those without: the test cannot tell")
	}
	for _, l := range []struct {
		name string
		set  func(a *Args)
	}{
		{"dp2", func(*Args) {}},
		{"tp2/sp", func(a *Args) { a.Model.TensorModelParallelSize, a.Model.SequenceParallel = 2, true }},
		{"cp2/p2p", func(a *Args) { a.Model.ContextParallelSize, a.Model.CPCommType = 2, []string{"p2p"} }},
	} {
		t.Run(l.name, func(t *testing.T) {
			a := args(2, true)
			l.set(&a)
			losses, grads := tpRun(t, a)
			checkEquivalent(t, losses, grads, wantLoss, wantGrads, 1e-6, 1e-5)
		})
	}
}

// TestResumeChecksData: a checkpoint records the data settings; resuming
// with another tokenizer is refused (the ids would mean other text), and
// with another seed the start-up line says the data settings differ.
func TestResumeChecksData(t *testing.T) {
	prefix := writeIndexedDocs(t, 1, 300, 40)
	dir := t.TempDir()
	first := indexedArgs(prefix, 3, true)
	first.Save = dir
	mustRun(t, first)

	other := indexedArgs(prefix, 6, false) // no --tokenizer-type
	other.Load = dir
	_, err := Run(context.Background(), other, Options{})
	if err == nil || !strings.Contains(err.Error(), `--tokenizer-type "NullTokenizer" in the checkpoint, "" in this run`) {
		t.Fatalf("resume without the checkpoint's tokenizer: %v", err)
	}

	reseeded := indexedArgs(prefix, 6, true)
	reseeded.Load, reseeded.Seed = dir, 99
	var out bytes.Buffer
	if _, err := Run(context.Background(), reseeded, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	if want := `data settings differ from the checkpoint's (seed "1234" → "99")`; !strings.Contains(out.String(), want) {
		t.Errorf("the start-up line does not say %q:\n%s", want, out.String())
	}
}

// TestIndexedDataErrors: settings that cannot work on indexed data are one
// error naming the flag, before any rank starts.
func TestIndexedDataErrors(t *testing.T) {
	prefix := writeIndexedDocs(t, 1, 300, 40)
	for _, c := range []struct {
		name   string
		change func(*Args)
		want   string
	}{
		{"no tokenizer, no vocabulary", func(a *Args) { a.Model.VocabSize = 0 }, "--data-path without --tokenizer-type"},
		{"prompt NullTokenizer cannot encode", func(a *Args) { setDocumentFlags(a); a.Sample = 4 }, `--sample-prompt "func "`},
		{"empty prompt", func(a *Args) { a.Sample, a.SamplePrompt = 4, "" }, "empty --sample-prompt"},
		{"test data path", func(a *Args) {
			a.DataPath, a.Split, a.TrainDataPath, a.TestDataPath = nil, "", []string{prefix}, []string{prefix}
		}, "--test-data-path: gotron evaluates no test split"},
		{"text directory", func(a *Args) { a.DataPath = []string{filepath.Dir(prefix)} }, "a directory, not a dataset prefix"},
	} {
		a := indexedArgs(prefix, 2, false)
		c.change(&a)
		_, err := Run(context.Background(), a, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line with %q", c.name, err, c.want)
		}
	}
}

// TestIndexedValidation: a valid split without documents is said on the
// start-up line; under --skip-train the valid dataset is built for
// eval_iters·global_batch samples, as the reference builds it.
func TestIndexedValidation(t *testing.T) {
	prefix := writeIndexedDocs(t, 1, 300, 40)
	a := indexedArgs(prefix, 2, false)
	a.Split = "1,0,0"
	var out bytes.Buffer
	if _, err := Run(context.Background(), a, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no validation (the valid split holds no documents") {
		t.Errorf("the start-up line does not say there is no validation:\n%s", out.String())
	}
	b := indexedArgs(prefix, 100, false)
	b.SkipTrain, b.EvalIters, b.EvalInterval = true, 3, 1
	n, err := b.sampleCounts()
	if err != nil || n != [3]int{100 * b.GlobalBatchSize, 3 * b.GlobalBatchSize, 0} {
		t.Errorf("--skip-train counts %v, %v; want train %d, valid %d, test 0", n, err, 100*b.GlobalBatchSize, 3*b.GlobalBatchSize)
	}
}

// TestTokenizerFilesNeedType: a tokenizer file without --tokenizer-type is
// refused, not ignored.
func TestTokenizerFilesNeedType(t *testing.T) {
	a := indexedArgs(writeIndexedDocs(t, 1, 30, 40), 2, false)
	a.Tokenizer.VocabFile = "vocab.json"
	_, err := Run(context.Background(), a, Options{})
	if err == nil || !strings.Contains(err.Error(), "--vocab-file without --tokenizer-type") {
		t.Fatalf("got %v", err)
	}
}
