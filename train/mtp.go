package train

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/pp"
	"github.com/gotron/gotron/tensor"
)

// mtpBatches returns the inputs of the multi-token-prediction depths for
// the micro-batch full (before cp.Split): each depth's batch (gpt.MTPBatch)
// cut to this rank's part, for the chunk with the depths and those after
// it (whose input carries the depths' states, and the head that reads
// their labels); nil for the others, or in evaluation (forwardOnly),
// where the reference computes the depths and drops them.
func (t *trainer) mtpBatches(c *gpt.Model, full data.Batch, forwardOnly bool) []data.Batch {
	if forwardOnly || !c.Spec.MTP && !c.Spec.AfterMTP {
		return nil
	}
	out := make([]data.Batch, t.a.Model.MTPNumLayers)
	for k := range out {
		out[k] = t.cpSplit(gpt.MTPBatch(full, k))
	}
	return out
}

// mtpInputs are the depths' token ids and labels for gpt.Inputs.MTP.
func mtpInputs(mtp []data.Batch) []gpt.MTPInputs {
	if mtp == nil {
		return nil
	}
	out := make([]gpt.MTPInputs, len(mtp))
	for k, b := range mtp {
		out[k] = gpt.MTPInputs{IDs: b.InputIDs, Labels: b.Labels}
	}
	return out
}

// mtpLossFunc is lossFunc for a chunk with the MTP depths, whose per-token
// losses are the main ones followed by each depth's (gpt.Inputs.MTP). The
// loss the schedule normalises is
//
//	Σ mask·loss + Σ_k c_k·Σ mask_k·loss_k,  c_k = (f/D)·max(N, 1)/N_k
//
// where N is the micro-batch's token count and N_k depth k's (its mask
// rolled k + 1 places, so fewer), f/D the scale of a depth
// (TransformerConfig.MTPLossScale) and c_k = 0 when N_k is 0: after the
// schedule divides by N (and M), depth k weighs (f/D)·(its mean loss),
// the reference's process_mtp_loss; under calculate_per_token_loss, its
// original_num_tokens/num_tokens rescaling. Under context parallelism N
// and N_k are the counts over the CP group (the main loss's rule; the
// reference divides each CP rank's depth loss by its own count). The
// main loss reported is the main sum alone; each depth's mean loss is
// reported for the log (mtpLosses).
func (t *trainer) mtpLossFunc(ctx context.Context, tape *autograd.Tape, b data.Batch, mtp []data.Batch, micro int) pp.LossFunc {
	return func(losses *autograd.Var) (pp.Loss, error) {
		n := b.Rows * b.Seq
		if losses.Value.Len() != (1+len(mtp))*n {
			return pp.Loss{}, fmt.Errorf("train: %d per-token losses for a micro-batch of %d tokens and %d MTP depths", losses.Value.Len(), n, len(mtp))
		}
		vals := losses.Value.Contiguous().Data()
		masks := make([][]float32, 1+len(mtp))
		masks[0] = gpt.SequenceFirst(b.LossMask, b.Rows, b.Seq)
		for k, m := range mtp {
			masks[k+1] = gpt.SequenceFirst(m.LossMask, m.Rows, m.Seq)
		}
		sums := make([]float32, len(masks))
		counts := make([]int64, len(masks))
		for k, m := range masks {
			sums[k], counts[k] = maskedSum(vals[k*n:(k+1)*n], m), countTokens(m)
			if err := t.checkLoss(micro, k, sums[k]); err != nil {
				return pp.Loss{}, err
			}
		}
		local := counts[0]
		if err := t.sumOverCP(ctx, sums, counts); err != nil {
			return pp.Loss{}, err
		}
		weights := make([]float32, len(vals))
		copy(weights, masks[0])
		scale := t.a.Model.MTPLossScale()
		report := microLoss{sum: float64(sums[0]), tokens: counts[0], mtp: make([]float64, len(mtp))}
		for k := range mtp {
			nk := counts[k+1]
			report.mtp[k] = float64(sums[k+1]) / float64(max(nk, 1))
			if nk == 0 {
				continue
			}
			c := float32(scale * float64(max(counts[0], 1)) / float64(nk))
			for i, m := range masks[k+1] {
				weights[(k+1)*n+i] = c * m
			}
		}
		l := pp.Loss{Value: autograd.WeightedSum(tape, losses, tensor.FromSlice(weights, len(weights))), NumTokens: local, Reported: report}
		if t.cp.Size() > 1 {
			l.GroupTokens = counts[0]
		}
		return l, nil
	}
}

// maskedSum is Σ x·mask in float64, rounded to float32: the value
// autograd.WeightedSum gives.
func maskedSum(x, mask []float32) float32 {
	var s float64
	for i, v := range x {
		s += float64(v) * float64(mask[i])
	}
	return float32(s)
}

// sumOverCP sums loss sums and token counts over the context-parallel
// group (nothing without context parallelism).
func (t *trainer) sumOverCP(ctx context.Context, sums []float32, counts []int64) error {
	if t.cp.Size() == 1 {
		return nil
	}
	g := t.cp.CP
	if err := g.AllReduce(ctx, comm.F32(sums), comm.Sum); err != nil {
		return fmt.Errorf("loss all-reduce over %s: %w", g.Name(), err)
	}
	if err := g.AllReduce(ctx, comm.I64(counts), comm.Sum); err != nil {
		return fmt.Errorf("token count all-reduce over %s: %w", g.Name(), err)
	}
	return nil
}

// mtpLosses returns each MTP depth's loss of the iteration, as the
// reference logs "mtp_k loss": the mean over the micro-batches of each
// one's mean depth loss, averaged over the data-parallel replicas; nil
// without MTP. A collective over the pipeline and data-parallel groups.
func (t *trainer) mtpLosses(ctx context.Context, res *pp.Result) ([]float64, error) {
	d := t.a.Model.MTPNumLayers
	if d <= 0 {
		return nil, nil
	}
	out := make([]float64, d)
	for _, r := range res.Store {
		l, ok := r.(microLoss)
		if !ok || len(l.mtp) != d {
			return nil, fmt.Errorf("train: the schedule stored %T without the %d MTP depths' losses", r, d)
		}
		for k, v := range l.mtp {
			out[k] += v / float64(len(res.Store))
		}
	}
	if err := t.floatsFromLastStage(ctx, out); err != nil {
		return nil, fmt.Errorf("MTP losses: %w", err)
	}
	for k, v := range out {
		avg, err := t.averageOverDP(ctx, v)
		if err != nil {
			return nil, err
		}
		out[k] = avg
	}
	return out, nil
}
