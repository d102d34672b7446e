package train

import (
	"context"
	"fmt"
	"math"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/pp/p2p"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// generate samples n tokens (bytes of byte-level text) from the model after
// prompt, encoded with the run's tokenizer, with temperature temp, feeding back at most seq_length tokens of context. The generator is
// seeded from --seed, so a trained model gives the same sample every time,
// on every rank of the tensor-parallel group that runs it. Under pipeline
// parallelism each step runs through the stages (forward only) and the last
// stage broadcasts the sampled token over the pipeline group.
// Under sequence parallelism the context is padded on the right to a
// multiple of the TP size, under context parallelism to a multiple of 2·cp
// (times the TP size under SP); causal attention keeps the padding from
// reaching the positions read.
func (t *trainer) generate(ctx context.Context, prompt string, n int, temp float64) (string, error) {
	tape := t.newTape(ctx)
	restore := tape.NoGrad()
	defer restore()
	tok := t.data.Text()
	ids := tok.Encode(prompt)
	nPrompt := len(ids)
	if nPrompt == 0 {
		return "", fmt.Errorf("sample: the prompt %q encodes to no tokens: give --sample-prompt some text", prompt)
	}
	g := rng.New(rng.SplitMix64(t.a.Seed ^ 0x5A17))
	seq := t.a.Model.SeqLength
	v := t.a.Model.VocabSize
	probs := make([]float64, v)
	for len(ids)-nPrompt < n {
		ctxIDs := ids
		if len(ctxIDs) > seq {
			ctxIDs = ctxIDs[len(ctxIDs)-seq:]
		}
		used := len(ctxIDs)
		k := 2 * t.cp.Size()
		if t.cp.Size() == 1 {
			k = 1
		}
		if a := t.a.Model; a.SequenceParallel && a.TensorModelParallelSize > 1 {
			k *= a.TensorModelParallelSize
		}
		if k > 1 {
			ctxIDs = append(append([]int32(nil), ctxIDs...), make([]int32, (k-used%k)%k)...)
		}
		logits, err := t.logits(ctx, tape, ctxIDs)
		if err != nil {
			return "", err
		}
		next := []int64{0}
		if logits != nil {
			last := logits.Value.Data()[(used-1)*v : used*v]
			next[0] = int64(sample(last, probs, temp, g))
		}
		if t.pp.Size() > 1 {
			if err := t.pp.Broadcast(ctx, comm.I64(next), t.lossRank()); err != nil {
				return "", fmt.Errorf("sample: broadcasting the next byte over %s: %w", t.pp.Name(), err)
			}
		}
		ids = append(ids, int32(next[0]))
	}
	return tok.Decode(ids), nil
}

// logits runs ids [1, len] forward through the rank's chunks in pipeline
// order (virtual stage by virtual stage, each stage receiving its input
// from the previous one through the pipeline communicator, in the
// pipeline's dtype) and returns the logits [len, 1, V] on the last stage,
// nil elsewhere.
func (t *trainer) logits(ctx context.Context, tape *autograd.Tape, ids []int32) (*autograd.Var, error) {
	full := len(ids)
	ids = cp.Split(ids, 1, full, t.cp.Size(), t.cp.Rank())
	s := len(ids)
	rows := s
	if t.a.Model.SequenceParallel && t.tp.Size() > 1 {
		rows /= t.tp.Size()
	}
	shape := []int{rows, 1, t.a.Model.HiddenSize}
	var out *autograd.Var
	var handed *tensor.Tensor // the output a stage on this rank hands to the next
	for v, c := range t.chunks {
		if !c.Spec.PreProcess {
			x, err := t.stageInput(ctx, v, shape, handed)
			if err != nil {
				return nil, fmt.Errorf("sample: receiving the hidden states of virtual stage %d: %w", v, err)
			}
			c.SetInputTensor(autograd.Const(x))
		}
		var err error
		in := gpt.Inputs{IDs: ids, Rows: 1, Seq: s, PreHook: t.paramPreHook(ctx, v), PostHook: t.paramPostHook(ctx, tape, v)}
		if out, err = c.ForwardInputs(tape, in, nil, nil); err != nil {
			return nil, err
		}
		if !c.Spec.PostProcess {
			if handed, err = t.stageOutput(ctx, v, out.Value.Contiguous()); err != nil {
				return nil, fmt.Errorf("sample: sending the hidden states of virtual stage %d: %w", v, err)
			}
			out = nil
		}
	}
	if out == nil || t.cp.Size() == 1 {
		return out, nil
	}
	return t.gatherLogits(ctx, out, full)
}

// gatherLogits all-gathers the context-parallel ranks' logits [s/cp, 1, V]
// into the whole sequence's [s, 1, V], in position order.
func (t *trainer) gatherLogits(ctx context.Context, out *autograd.Var, s int) (*autograd.Var, error) {
	g := t.cp.CP
	local := out.Value.Contiguous().Data()
	all := make([]float32, len(local)*g.Size())
	if err := g.AllGather(ctx, comm.F32(all), comm.F32(local)); err != nil {
		return nil, fmt.Errorf("sample: gathering the logits over %s: %w", g.Name(), err)
	}
	v := len(local) / (s / g.Size())
	whole := tensor.New(s, 1, v)
	for r := range g.Size() {
		for i, p := range cp.Positions(s, g.Size(), r) {
			copy(whole.Data()[p*v:(p+1)*v], all[(r*len(local))+i*v:(r*len(local))+(i+1)*v])
		}
	}
	return autograd.Const(whole), nil
}

// sample draws an index from softmax(logits/temp), or at temp 0 takes
// the largest logit (greedy decoding).
func sample(logits []float32, probs []float64, temp float64, g *rng.RNG) int32 {
	if temp == 0 {
		return argmax(logits)
	}
	m := math.Inf(-1)
	for _, x := range logits {
		m = math.Max(m, float64(x))
	}
	var sum float64
	for i, x := range logits {
		probs[i] = math.Exp((float64(x) - m) / temp)
		sum += probs[i]
	}
	u := g.Float64() * sum
	for i, p := range probs {
		u -= p
		if u <= 0 {
			return int32(i)
		}
	}
	return int32(len(probs) - 1)
}

// argmax is the index of the largest logit (the first of equals): the
// greedy choice, a temperature of 0.
func argmax(logits []float32) int32 {
	best := 0
	for i, x := range logits {
		if x > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// stageInput receives chunk v's input from the previous stage: handed
// over on this rank (the V placement's turn), or from the neighbouring
// rank the placement says, in the pipeline's dtype.
func (t *trainer) stageInput(ctx context.Context, v int, shape []int, handed *tensor.Tensor) (*tensor.Tensor, error) {
	pl, P, V := t.a.Model.PipelinePlacement, t.pp.Size(), len(t.chunks)
	if q, _, _ := pl.Prev(P, V, t.pp.Rank(), v); q == t.pp.Rank() {
		return handed, nil
	}
	ex := p2p.Exchange{RecvPrev: pl.TowardNextRank(v), RecvNext: !pl.TowardNextRank(v), Shape: shape}
	fromPrev, fromNext, _, err := t.p2p.Communicate(ctx, ex)
	if fromPrev == nil {
		fromPrev = fromNext
	}
	return fromPrev, err
}

// stageOutput sends chunk v's output x to the next stage, or returns what
// the next stage receives when it is on this rank.
func (t *trainer) stageOutput(ctx context.Context, v int, x *tensor.Tensor) (*tensor.Tensor, error) {
	pl, P, V := t.a.Model.PipelinePlacement, t.pp.Size(), len(t.chunks)
	if q, _, _ := pl.Next(P, V, t.pp.Rank(), v); q == t.pp.Rank() {
		return t.p2p.HandOver(x), nil
	}
	ex := p2p.Exchange{SendNext: x}
	if !pl.TowardNextRank(v) {
		ex = p2p.Exchange{SendPrev: x}
	}
	_, _, _, err := t.p2p.Communicate(ctx, ex)
	return nil, err
}
