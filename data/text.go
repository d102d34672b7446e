package data

import (
	"fmt"
	"sync"
)

// TextDataset serves training rows cut from a text corpus, tokenized byte-level.
//
// The corpus becomes one token stream, every document followed by [EndOfDocument] (see
// [Corpus.Stream]); sample k (0 <= k < NumSamples) is the window of Seq+1 tokens starting
// at k·Seq, so consecutive samples share one token and NumSamples = (len(stream)-1) / Seq
// (the tail that does not fill a window is not used). A sample's input ids are its first
// Seq tokens and its labels the last Seq. Windows run across document boundaries, as in
// Megatron's GPTDataset; the attention is not reset at EndOfDocument.
//
// The order of samples is a permutation per epoch: with N = NumSamples, global row g of
// a step is sample number i = consumed + g of the run (consumed: the samples of the steps
// before it, s·rowsTotal at a constant global batch), in epoch e = i / N at position
// p = i mod N, and it is sample perm_e[p], where perm_e is the Fisher-Yates shuffle of
// 0..N-1 driven by the SplitMix64 generator seeded with Seed+e (its k-th output is
// Splitmix64(Seed+e+k·0x9E3779B97F4A7C15); for i = N-1 down to 1, swap positions i and
// output mod (i+1)). The data position is thus a function of the step alone, as
// [Dataset] requires.
//
// The loss mask is all ones, Megatron's default: the model also learns to end a document
// (the label EndOfDocument) and, less usefully, to guess the first byte of the next one.
// With EODMaskLoss set, positions whose input is EndOfDocument get mask 0, as Megatron's
// --eod-mask-loss does.
//
// A TextDataset is safe for concurrent use; it caches the permutations of the two most
// recently used epochs.
type TextDataset struct {
	// EODMaskLoss masks the loss of positions whose input token is EndOfDocument. Set it
	// before the first call to Batch.
	EODMaskLoss bool

	seq    int
	seed   uint64
	stream []byte
	n      int

	mu    sync.Mutex
	perms [2]epochPerm // most recent first
}

// epochPerm is the cached sample order of one epoch; perm is nil when unused.
type epochPerm struct {
	epoch uint64
	perm  []int
}

// NewTextDataset returns the dataset of seq-token rows cut from the corpus c, ordered with
// seed. It is an error if the corpus is too short for one sample (seq+1 tokens).
func NewTextDataset(c *Corpus, seq int, seed uint64) (*TextDataset, error) {
	if seq < 1 {
		return nil, fmt.Errorf("text dataset: sequence length %d: want at least 1", seq)
	}
	stream := c.Stream()
	if len(stream) < seq+1 {
		return nil, fmt.Errorf("text dataset from %s: the corpus has %d tokens (%d bytes and %d end-of-document tokens) but one sample needs seq+1 = %d: add text or shorten --seq-length",
			c.Source, len(stream), c.NumBytes(), len(c.Docs), seq+1)
	}
	return &TextDataset{seq: seq, seed: seed, stream: stream, n: (len(stream) - 1) / seq}, nil
}

// NumSamples returns the number of samples in one epoch, (len(stream)-1) / Seq.
func (d *TextDataset) NumSamples() int { return d.n }

// Seq returns the sequence length of the rows.
func (d *TextDataset) Seq() int { return d.seq }

// Vocab returns the vocabulary size of the byte-level tokens, 256.
func (d *TextDataset) Vocab() int { return ByteTokenizer{}.Vocab() }

// Sample returns the tokens of sample k of the stream, Seq+1 tokens starting at k·Seq
// (not a copy: do not modify). It panics if k is not within [0, NumSamples).
func (d *TextDataset) Sample(k int) []byte {
	if k < 0 || k >= d.n {
		panic(fmt.Sprintf("data: TextDataset.Sample(%d): want 0 <= k < %d", k, d.n))
	}
	return d.stream[k*d.seq : k*d.seq+d.seq+1]
}

// SampleIndex returns which sample of the stream global row g of step's global batch is
// (see [TextDataset]). It panics if the step is negative or g is not within
// [0, step.Rows), a bug in the caller.
func (d *TextDataset) SampleIndex(step Step, g int) int {
	checkRows(step, g, 1)
	i := uint64(step.Consumed) + uint64(g)
	epoch, pos := i/uint64(d.n), i%uint64(d.n)
	return d.epochPerm(epoch)[pos]
}

// epochPerm returns the sample order of epoch e, computing it if it is not cached.
func (d *TextDataset) epochPerm(e uint64) []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.perms {
		if c.perm != nil && c.epoch == e {
			return c.perm
		}
	}
	p := permutation(d.n, d.seed+e)
	d.perms[1] = d.perms[0]
	d.perms[0] = epochPerm{epoch: e, perm: p}
	return p
}

// Batch returns rows [row0, row0+rows) of the global batch of step (see [Dataset]).
func (d *TextDataset) Batch(step Step, row0, rows int) Batch {
	checkRows(step, row0, rows)
	b := newBatch(rows, d.seq)
	for r := 0; r < rows; r++ {
		w := d.Sample(d.SampleIndex(step, row0+r))
		off := r * d.seq
		for t := 0; t < d.seq; t++ {
			b.InputIDs[off+t] = int32(w[t])
			b.Labels[off+t] = int32(w[t+1])
			if d.EODMaskLoss && int32(w[t]) == EndOfDocument {
				b.LossMask[off+t] = 0
			}
		}
	}
	return b
}
