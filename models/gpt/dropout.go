package gpt

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor/rng"
)

// The hidden dropout's sites, which key its counter-based masks with the
// layer's number: the embedding's (of the decoder, layer embeddingLayer;
// of an MTP depth, that depth's layer), and a layer's after its attention
// and after its MLP.
const (
	siteEmbedding uint64 = iota
	siteAttention
	siteMLP
	siteAttentionProbs
)

// embeddingLayer numbers the decoder's embedding among the layers for its
// dropout's key (decoder layers count from 0, MTP depths from num_layers).
const embeddingLayer = -1

// dropoutKeys are what counter-based dropout keys a micro-batch's masks
// with (Randomness.Counter): the run's key, each row's sample index and
// the place in the whole sequence of each sequence row the rank holds.
type dropoutKeys struct {
	key     uint64
	samples []int64
	pos     []int
}

// rowPositions returns the place in the whole sequence of each sequence row
// of the rank's hidden states, for s tokens of each row on the rank: its
// context-parallel chunks, then its sequence-parallel slice of them.
func (m *Model) rowPositions(s int) []int {
	pos := make([]int, s)
	for i := range pos {
		pos[i] = i
	}
	if n := m.CP.Size(); n > 1 {
		pos = cp.Positions(s*n, n, m.CP.Rank())
	}
	if m.sequenceParallel() {
		rows := s / m.tpSize()
		pos = pos[m.tpRank()*rows : (m.tpRank()+1)*rows]
	}
	return pos
}

// dropout applies the hidden dropout p at site of layer to x ([rows, b, h]
// of the rank): counter-based under Randomness.Counter, else drawn from
// the pass's generator.
func (ps *pass) dropout(t *autograd.Tape, x *autograd.Var, p float32, layer int, site uint64) *autograd.Var {
	if ps.keys == nil || p == 0 || !t.Recording() {
		return nn.Dropout(t, x, p, ps.hidden)
	}
	k := ps.keys
	sh := x.Value.Shape()
	if len(sh) != 3 || sh[0] != len(k.pos) || sh[1] != len(k.samples) {
		t.Fail(fmt.Errorf("gpt: dropout of hidden states %v, want [%d, %d, h]", sh, len(k.pos), len(k.samples)))
		return x
	}
	b, h := uint64(sh[1]), uint64(sh[2])
	site = rng.Derive(rng.Derive(k.key, uint64(int64(layer))), site)
	return nn.DropoutKeyed(t, x, p, func(r int) (uint64, uint64) {
		i, j := uint64(r)/b, uint64(r)%b
		return rng.Derive(site, uint64(k.samples[j])), uint64(k.pos[i]) * h
	})
}

// attentionKeys returns the counter-based keys of a layer's attention
// dropout over seq tokens (the whole sequence), heads of them on the
// tensor-parallel rank: batch row r's head h is the stream of the row's
// sample and the head's place among all heads (nil without
// Randomness.Counter).
func (ps *pass) attentionKeys(m *Model, layer, seq, heads int) *nn.AttentionKeys {
	k := ps.keys
	if k == nil {
		return nil
	}
	site := rng.Derive(rng.Derive(k.key, uint64(int64(layer))), siteAttentionProbs)
	base := m.tpRank() * heads
	return &nn.AttentionKeys{Seq: seq, Key: func(row, head int) uint64 {
		return rng.Derive(rng.Derive(site, uint64(k.samples[row])), uint64(base+head))
	}}
}
