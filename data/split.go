package data

import (
	"fmt"
	"hash/fnv"
)

// Split divides the corpus into held-out files: a document goes to valid when its score
//
//	u = Splitmix64(FNV-1a-64(Name) ^ Splitmix64(seed))
//
// read as a fraction, u / 2^64 (computed as (u >> 11) · 2^-53), is below validFraction,
// and to train otherwise. A document's side depends only on its name and the seed, not on
// the other files, so adding files never moves existing ones. When 0 < validFraction < 1
// and the corpus has at least two documents neither side is left empty: if no document
// falls in valid the one with the smallest score moves there, and if none falls in train
// the one with the largest score moves there. Both corpora keep the corpus order.
//
// Split panics if validFraction is not within [0, 1]: a validated config never passes
// one, so that is a bug in the caller.
func (c *Corpus) Split(validFraction float64, seed uint64) (train, valid *Corpus) {
	if !(validFraction >= 0 && validFraction <= 1) {
		panic(fmt.Sprintf("data: Corpus.Split(%v): the valid fraction must be within [0, 1]", validFraction))
	}
	train = &Corpus{Source: c.Source + " (train split)"}
	valid = &Corpus{Source: c.Source + " (valid split)"}
	scores := make([]uint64, len(c.Docs))
	inValid := make([]bool, len(c.Docs))
	nValid := 0
	for i, d := range c.Docs {
		scores[i] = splitScore(d.Name, seed)
		if float64(scores[i]>>11)*0x1p-53 < validFraction {
			inValid[i] = true
			nValid++
		}
	}
	if validFraction > 0 && validFraction < 1 && len(c.Docs) >= 2 {
		switch nValid {
		case 0:
			inValid[argBest(scores, func(a, b uint64) bool { return a < b })] = true
		case len(c.Docs):
			inValid[argBest(scores, func(a, b uint64) bool { return a > b })] = false
		}
	}
	for i, d := range c.Docs {
		if inValid[i] {
			valid.Docs = append(valid.Docs, d)
		} else {
			train.Docs = append(train.Docs, d)
		}
	}
	return train, valid
}

// splitScore is the hash deciding the side of the document called name.
func splitScore(name string, seed uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return Splitmix64(h.Sum64() ^ Splitmix64(seed))
}

// argBest returns the index of the first element of xs that no other beats under better.
func argBest(xs []uint64, better func(a, b uint64) bool) int {
	best := 0
	for i, x := range xs {
		if better(x, xs[best]) {
			best = i
		}
	}
	return best
}
