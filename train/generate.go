package train

import (
	"math"

	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/tensor/rng"
)

// generate samples n bytes from the model after prompt, with temperature
// temp, feeding back at most seq_length tokens of context. The generator is
// seeded from --seed, so a trained model gives the same sample every time,
// on every rank of the tensor-parallel group that runs it.
// Under sequence parallelism the context is padded on the right to a
// multiple of the TP size; causal attention keeps the padding from reaching
// the positions read.
func (t *trainer) generate(prompt string, n int, temp float64) (string, error) {
	restore := t.tape.NoGrad()
	defer restore()
	tok := data.ByteTokenizer{}
	ids := tok.Encode(prompt)
	g := rng.New(rng.SplitMix64(t.a.Seed ^ 0x5A17))
	seq := t.a.Model.SeqLength
	v := t.a.Model.VocabSize
	probs := make([]float64, v)
	for len(ids)-len(prompt) < n {
		ctx := ids
		if len(ctx) > seq {
			ctx = ctx[len(ctx)-seq:]
		}
		used := len(ctx)
		if a := t.a.Model; a.SequenceParallel && a.TensorModelParallelSize > 1 {
			k := a.TensorModelParallelSize
			ctx = append(append([]int32(nil), ctx...), make([]int32, (k-used%k)%k)...)
		}
		logits, err := t.model.Forward(t.tape, ctx, nil, 1, len(ctx), nil)
		if err != nil {
			return "", err
		}
		ctx = ctx[:used]
		last := logits.Value.Data()[(len(ctx)-1)*v : len(ctx)*v]
		ids = append(ids, sample(last, probs, temp, g))
	}
	return tok.Decode(ids), nil
}

// sample draws an index from softmax(logits/temp).
func sample(logits []float32, probs []float64, temp float64, g *rng.RNG) int32 {
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
