package gptdata

import (
	"fmt"
)

// gptDataset is the reference's GPTDataset: a split of one Source in the
// order of its index arrays.
type gptDataset struct {
	src         Source
	sizes       []int32
	cfg         *Config
	split       int
	ids         pyDict // the reference's unique identifiers (for blends)
	description string
	idx         *gptIndex
}

func (d *gptDataset) Len() int         { return d.idx.len() }
func (d *gptDataset) SeqLength() int   { return d.cfg.SeqLength }
func (d *gptDataset) Describe() string { return d.description }

// Sample returns sample i: unshuffled sample shuffle[i], the tokens from
// row shuffle[i] of the sample index to the next row plus one (the
// reference's _query_document_sample_shuffle_indices and __getitem__).
func (d *gptDataset) Sample(i int) Sample {
	n := d.Len()
	if i < 0 || i >= n {
		panic(fmt.Sprintf("gptdata: sample %d of the %s dataset %s, which has %d", i, splitNames[d.split], d.src.Prefix(), n))
	}
	seq := d.cfg.SeqLength
	j := int(d.idx.shuffle.at(i))
	s := d.idx.sample.i32
	b, bo, e, eo := int(s[2*j]), int(s[2*j+1]), int(s[2*j+2]), int(s[2*j+3])
	doc := d.idx.doc.i32
	text := make([]int32, 0, seq+1)
	if b == e {
		text = d.src.Tokens(text, int(doc[b]), bo, eo-bo+1)
	} else {
		for k := b; k <= e; k++ {
			off, cnt := 0, eo+1
			if k == b {
				off = bo
			}
			if k < e {
				cnt = int(d.sizes[doc[k]]) - off
			}
			text = d.src.Tokens(text, int(doc[k]), off, cnt)
		}
	}
	for len(text) < seq+1 { // never with whole samples; the reference pads
		text = append(text, d.cfg.pad())
	}
	return makeSample(text, d.cfg)
}

// makeSample computes the masks of the seq+1 tokens text as the
// reference's __getitem__ and _get_ltor_masks_and_position_ids do, on the
// inputs text[:seq] and labels text[1:], then reads pad ids as 0.
func makeSample(text []int32, cfg *Config) Sample {
	seq := len(text) - 1
	eod, pad := cfg.EOD, cfg.pad()
	s := Sample{Tokens: text, LossMask: make([]float32, seq)}
	for t := range seq {
		if !(cfg.EODMaskLoss && text[t] == eod) && text[t+1] != pad {
			s.LossMask[t] = 1
		}
	}
	if cfg.ResetPositionIDs {
		s.PositionIDs = make([]int32, seq)
		p := int32(0)
		for t := range seq {
			s.PositionIDs[t] = p
			p++
			if text[t] == eod {
				p = 0
			}
		}
	}
	if cfg.ResetAttentionMask {
		s.Segments = make([]int32, seq)
		c := int32(0)
		for t := range seq {
			s.Segments[t] = c
			if text[t] == eod {
				c++
			}
		}
	}
	for t, v := range text {
		if v == pad {
			text[t] = 0
		}
	}
	return s
}

// check verifies index arrays read from a cache against the dataset: dtypes
// and shapes, every document id a sequence of src, every sample exactly
// seq+1 tokens within its documents, and the shuffle index a permutation.
func (x *gptIndex) check(sizes []int32, seq int) error {
	if x.doc.descr != "<i4" || len(x.doc.shape) != 1 {
		return fmt.Errorf("document index: dtype %s shape %v, want <i4 and one axis", x.doc.descr, x.doc.shape)
	}
	for i, v := range x.doc.i32 {
		if v < 0 || int(v) >= len(sizes) {
			return fmt.Errorf("document index: element %d is %d, not a sequence of the %d of the dataset", i, v, len(sizes))
		}
	}
	if x.sample.descr != "<i4" || len(x.sample.shape) != 2 || x.sample.shape[1] != 2 || x.sample.shape[0] < 1 {
		return fmt.Errorf("sample index: dtype %s shape %v, want <i4 and (S+1, 2)", x.sample.descr, x.sample.shape)
	}
	s, doc := x.sample.i32, x.doc.i32
	for k := 0; k+1 < x.sample.shape[0]; k++ {
		b, bo, e, eo := int(s[2*k]), int(s[2*k+1]), int(s[2*k+2]), int(s[2*k+3])
		if b < 0 || b > e || e >= len(doc) || bo < 0 || bo > int(sizes[doc[b]]) || eo < 0 || eo+1 > int(sizes[doc[e]]) {
			return fmt.Errorf("sample index: rows %d and %d, (%d, %d) and (%d, %d), are not a sample within the document index of %d", k, k+1, b, bo, e, eo, len(doc))
		}
		n := int64(eo+1) - int64(bo)
		for d := b; d < e; d++ {
			n += int64(sizes[doc[d]])
		}
		if n != int64(seq)+1 {
			return fmt.Errorf("sample index: sample %d spans %d tokens, want %d", k, n, seq+1)
		}
	}
	total := x.sample.shape[0] - 1
	if len(x.shuffle.shape) != 1 || x.shuffle.shape[0] != total || (x.shuffle.descr != "<u4" && x.shuffle.descr != "<i8") {
		return fmt.Errorf("shuffle index: dtype %s shape %v, want <u4 or <i8 and (%d,)", x.shuffle.descr, x.shuffle.shape, total)
	}
	seen := make([]bool, total)
	for i := range total {
		v := x.shuffle.at(i)
		if v < 0 || v >= int64(total) || seen[v] {
			return fmt.Errorf("shuffle index: element %d, %d, repeats or is not a sample of the %d", i, v, total)
		}
		seen[v] = true
	}
	return nil
}
