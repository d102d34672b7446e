package cp

import (
	"math"

	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tensor/rng"
)

// blocks is the blockwise attention of the rank's queries (after the
// all-to-all) against one member's keys and values at a time, in the packed
// layouts:
//
//	Q, O, dQ, dO  [pairs][rows][d]     pair = batch row·h + head
//	KV, dKV       [pairs][rows][2d]    K in columns [0, d), V in [d, 2d)
//	lse, δ        [pairs][rows]
//
// A member's rows are chunks of c rows with known sequence indices; query
// chunk qi sees key chunk ki fully when ki < qi, causally when ki = qi, and
// not at all when ki > qi; with segment ids, only where a query and a key
// share a segment. The block of (pair, qi, ki) is computed only by
// the rank holding query chunk qi, in forward and backward alike.
type blocks struct {
	p       *plan
	dtype   tensor.DType
	scale   float32
	dropout float32
	seed    uint64
	workers int
	seg     []int32 // the batch rows' whole-sequence segment ids [b, s], or nil
	keys    *nn.AttentionKeys
	scratch []*nn.BlockScratch
	tmp     [][]float32 // per worker: one chunk's output [c][d] and lse [c]
}

func newBlocks(p *plan, o Options, seed uint64, workers int) *blocks {
	dtype, dropout := o.DType, o.Dropout
	k := &blocks{p: p, dtype: dtype, scale: nn.AttentionScale(p.d), dropout: dropout, seed: seed, workers: workers, seg: o.Segments, keys: o.Keys}
	k.scratch = make([]*nn.BlockScratch, workers)
	k.tmp = make([][]float32, workers)
	for w := range workers {
		k.scratch[w] = nn.NewBlockScratch(p.c, p.c, dtype, dropout > 0)
		k.tmp[w] = make([]float32, p.c*p.d+p.c)
	}
	return k
}

// block returns the AttentionBlock of query chunk q against key chunk k of
// pair pair, and whether it has any live key.
func (k *blocks) block(pair, q, kc int) (nn.AttentionBlock, bool) {
	p := k.p
	if kc > q {
		return nn.AttentionBlock{}, false
	}
	off := 0
	if kc < q {
		off = p.c // every key
	}
	b := nn.AttentionBlock{M: p.c, N: p.c, D: p.d, Offset: off, Scale: k.scale, DType: k.dtype, Dropout: k.dropout}
	if k.seg != nil {
		// The chunks' segment ids, from the batch row's whole sequence; a
		// block whose keys all lie in other documents is skipped.
		row := k.seg[(pair/p.h)*p.seq():]
		b.QSeg, b.KSeg = row[q*p.c:(q+1)*p.c], row[kc*p.c:(kc+1)*p.c]
		if !kernels.SegmentsMeet(p.c, p.c, off, b.QSeg, b.KSeg) {
			return nn.AttentionBlock{}, false
		}
	}
	if k.dropout > 0 && k.keys != nil {
		b.Keys, b.Key = k.keys, k.keys.Key(pair/p.h, p.headBase+pair%p.h)
		b.Q0, b.K0 = q*p.c, kc*p.c
	} else if k.dropout > 0 {
		// The mask is keyed by the pair's batch row and head among the
		// tensor-parallel rank's heads and by the two chunks' sequence
		// indices: the same for every communication type.
		bi, hi := pair/p.h, pair%p.h
		n := uint64(2 * max(p.cp, 1))
		key := ((uint64(bi)*uint64(p.heads)+uint64(p.headBase+hi))*n+uint64(q))*n + uint64(kc)
		b.Seed = rng.SplitMix64(k.seed + key)
	}
	return b, true
}

// attend merges the attention of the local queries q against one member's
// kv (holding chunks kchunks) into the running output o and log-sum-exp
// lse.
func (k *blocks) attend(q, kv []float32, kchunks []int, o, lse []float32) {
	p := k.p
	rows, d, c := p.rows(), p.d, p.c
	qchunks := p.chunksOf(-1)
	kernels.ParallelForWorker(p.pairs(), k.workers, func(w, lo, hi int) {
		s := k.scratch[w]
		ob, lseb := k.tmp[w][:c*d], k.tmp[w][c*d:]
		for pair := lo; pair < hi; pair++ {
			qp, op, lp := q[pair*rows*d:], o[pair*rows*d:], lse[pair*rows:]
			kp := kv[pair*rows*2*d:]
			for qi, qc := range qchunks {
				for ki, kc := range kchunks {
					b, ok := k.block(pair, qc, kc)
					if !ok {
						continue
					}
					kr := kp[ki*c*2*d:]
					b.Forward(s, qp[qi*c*d:], d, kr, 2*d, kr[d:], 2*d, ob, d, lseb)
					kernels.MergeAttention(op[qi*c*d:], d, lp[qi*c:(qi+1)*c], ob, d, lseb, d)
				}
			}
		}
	})
}

// grads adds the gradients of the blocks of the local queries against one
// member's kv (chunks kchunks) to dq and to that member's dkv, given dO,
// the rows' whole log-sum-exp and δ.
func (k *blocks) grads(q, kv []float32, kchunks []int, do, lse, delta, dq, dkv []float32) {
	p := k.p
	rows, d, c := p.rows(), p.d, p.c
	qchunks := p.chunksOf(-1)
	kernels.ParallelForWorker(p.pairs(), k.workers, func(w, lo, hi int) {
		s := k.scratch[w]
		for pair := lo; pair < hi; pair++ {
			qp, dop, lp, dp := q[pair*rows*d:], do[pair*rows*d:], lse[pair*rows:], delta[pair*rows:]
			dqp := dq[pair*rows*d:]
			kp, dkp := kv[pair*rows*2*d:], dkv[pair*rows*2*d:]
			for qi, qc := range qchunks {
				for ki, kc := range kchunks {
					b, ok := k.block(pair, qc, kc)
					if !ok {
						continue
					}
					kr, dkr := kp[ki*c*2*d:], dkp[ki*c*2*d:]
					b.Backward(s, qp[qi*c*d:], d, kr, 2*d, kr[d:], 2*d, dop[qi*c*d:], d,
						lp[qi*c:(qi+1)*c], dp[qi*c:(qi+1)*c], dqp[qi*c*d:], d, dkr, 2*d, dkr[d:], 2*d)
				}
			}
		}
	})
}

// newLSE returns a running log-sum-exp of n rows that have seen no key.
func newLSE(n int) []float32 {
	lse := make([]float32, n)
	for i := range lse {
		lse[i] = float32(math.Inf(-1))
	}
	return lse
}
