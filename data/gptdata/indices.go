package gptdata

import (
	"fmt"
	"math"

	"github.com/gotron/gotron/data/internal/nprand"
)

// gptIndex holds a GPTDataset's index arrays (see the package comment).
type gptIndex struct {
	doc     *array // <i4 [E·docs]
	sample  *array // <i4 [S+1, 2]
	shuffle *array // <u4 or <i8 [S]
}

// len returns the number of samples S.
func (x *gptIndex) len() int { return x.shuffle.size() }

// gptPlan is what the indices of a split follow from: its documents, tokens
// per epoch, epochs and whether the final epoch is shuffled separately.
type gptPlan struct {
	beg, end       int
	tokensPerEpoch int64
	epochs         int
	separate       bool
	sansFinal      int // samples of the first epochs−1 epochs, when separate
}

// planGPT computes the plan of documents [beg, end) of sizes for numSamples
// samples (< 0: one epoch) of seq+1 tokens: the reference's
// _get_num_tokens_per_epoch, _get_num_epochs and its separate_final_epoch
// rule (threshold 0.80).
func planGPT(sizes []int32, beg, end, numSamples, seq int) (gptPlan, error) {
	p := gptPlan{beg: beg, end: end, epochs: 1}
	for _, n := range sizes[beg:end] {
		p.tokensPerEpoch += int64(n)
	}
	if p.tokensPerEpoch < 2 {
		return p, fmt.Errorf("its documents [%d, %d) hold %d tokens, want at least 2", beg, end, p.tokensPerEpoch)
	}
	if numSamples < 0 {
		return p, nil
	}
	need := int64(numSamples)*int64(seq) + 1
	e := (need + p.tokensPerEpoch - 1) / p.tokensPerEpoch
	if e*int64(end-beg) > math.MaxInt32 {
		return p, fmt.Errorf("%d samples need %d epochs of its %d documents, more than a document index holds", numSamples, e, end-beg)
	}
	p.epochs = int(max(e, 1))
	if p.epochs > 1 {
		sansFinal := (int64(p.epochs-1)*p.tokensPerEpoch - 1) / int64(seq)
		perEpoch := (p.tokensPerEpoch - 1) / int64(seq)
		fromFinal := int64(numSamples) - sansFinal
		p.separate = fromFinal < int64(0.80*float64(perEpoch))
		p.sansFinal = int(sansFinal)
	}
	return p, nil
}

// buildGPTIndex builds the three index arrays of plan p from one
// RandomState(seed): the document index's shuffles first, then the
// shuffle index's.
func buildGPTIndex(sizes []int32, p gptPlan, seq int, seed uint32) *gptIndex {
	r := nprand.New(seed)
	doc := documentIndex(p.beg, p.end, p.epochs, p.separate, r)
	x := &gptIndex{doc: &array{descr: "<i4", shape: []int{len(doc)}, i32: doc}}
	s := sampleIndex(sizes, doc, seq, p.epochs, p.tokensPerEpoch)
	x.sample = &array{descr: "<i4", shape: []int{len(s) / 2, 2}, i32: s}
	total := len(s)/2 - 1
	first := total
	if p.separate {
		first = p.sansFinal
	}
	x.shuffle = shuffleIndex(first, total, r)
	return x
}

// documentIndex returns documents [beg, end) repeated epochs times and
// shuffled (the reference's _build_document_index); separate shuffles the
// final epoch on its own after the others.
func documentIndex(beg, end, epochs int, separate bool, r *nprand.RandomState) []int32 {
	if separate && epochs > 1 {
		first := documentIndex(beg, end, epochs-1, false, r)
		return append(first, documentIndex(beg, end, 1, false, r)...)
	}
	d := make([]int32, 0, epochs*(end-beg))
	for range epochs {
		for i := beg; i < end; i++ {
			d = append(d, int32(i))
		}
	}
	nprand.Shuffle(r, d)
	return d
}

// sampleIndex is the reference's build_sample_idx (helpers.cpp) without
// partial samples and with the extra token: the flattened [S+1, 2] rows
// (position in doc, offset) where each sample of seq+1 tokens starts, S =
// (epochs·tokensPerEpoch − 1) div seq; sample k+1 starts at the last token
// of sample k. The reference's int32 rows (its int64 ones need a document
// index of 2^31 entries, which planGPT refuses).
func sampleIndex(sizes, doc []int32, seq, epochs int, tokensPerEpoch int64) []int32 {
	n := (int64(epochs)*tokensPerEpoch - 1) / int64(seq)
	out := make([]int32, 2*(n+1))
	di, off := 0, int64(0)
	for k := int64(1); k <= n; k++ {
		remaining := int64(seq + 1)
		for remaining != 0 {
			dl := int64(sizes[doc[di]]) - off
			remaining -= dl
			if remaining <= 0 {
				off += remaining + dl - 1
				remaining = 0
			} else {
				if di == len(doc)-1 { // never with whole samples; the reference's guard
					off = int64(sizes[doc[di]]) - 1
					break
				}
				di++
				off = 0
			}
		}
		out[2*k], out[2*k+1] = int32(di), int32(off)
	}
	return out
}

// shuffleIndex returns arange(first) shuffled followed by arange(first,
// total) shuffled (the reference's _build_shuffle_index): uint32 unless
// total ≥ 2^32 − 2, then int64.
func shuffleIndex(first, total int, r *nprand.RandomState) *array {
	if total < math.MaxUint32-1 {
		s := make([]uint32, total)
		for i := range s {
			s[i] = uint32(i)
		}
		nprand.Shuffle(r, s[:first])
		if first < total {
			nprand.Shuffle(r, s[first:])
		}
		return &array{descr: "<u4", shape: []int{total}, u32: s}
	}
	s := make([]int64, total)
	for i := range s {
		s[i] = int64(i)
	}
	nprand.Shuffle(r, s[:first])
	if first < total {
		nprand.Shuffle(r, s[first:])
	}
	return &array{descr: "<i8", shape: []int{total}, i64: s}
}

// blendingIndices is the reference's build_blending_indices: for sample k
// the dataset d with the largest weights[d]·max(k, 1) − taken[d] (the first
// on ties), and its next sample.
func blendingIndices(weights []float64, size int) (*array, *array) {
	di := make([]int16, size)
	dsi := make([]int64, size)
	taken := make([]int64, len(weights))
	for k := range size {
		kd := max(float64(k), 1)
		best, bestErr := 0, weights[0]*kd-float64(taken[0])
		for d := 1; d < len(weights); d++ {
			if e := weights[d]*kd - float64(taken[d]); e > bestErr {
				best, bestErr = d, e
			}
		}
		di[k], dsi[k] = int16(best), taken[best]
		taken[best]++
	}
	return &array{descr: "<i2", shape: []int{size}, i16: di}, &array{descr: "<i8", shape: []int{size}, i64: dsi}
}
