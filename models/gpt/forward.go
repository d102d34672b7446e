package gpt

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor/rng"
)

// Forward runs the model on a micro-batch of token ids [b, s] (row-major,
// as data batches hold them) and returns the per-token losses against labels
// [b, s], as a [s·b] vector in sequence-first order (token (i, j) of row j at
// position i is element i·b + j). With labels nil it returns the logits
// [s, b, V] instead. g drives dropout (ignored when the tape is not
// recording or dropout is 0).
func (m *Model) Forward(t *autograd.Tape, ids, labels []int32, b, s int, g *rng.RNG) (*autograd.Var, error) {
	cfg := m.Config
	if len(ids) != b*s || labels != nil && len(labels) != b*s {
		return nil, fmt.Errorf("gpt: %d ids and %d labels for a [%d, %d] micro-batch", len(ids), len(labels), b, s)
	}
	if s > cfg.MaxPositions() {
		return nil, fmt.Errorf("gpt: sequence length %d exceeds max_position_embeddings %d", s, cfg.MaxPositions())
	}
	x := nn.Embedding(t, m.WordEmbeddings.Var, SequenceFirst(ids, b, s), s, b)
	x = nn.AddPositions(t, x, m.PositionEmbeddings.Var)
	x = nn.Dropout(t, x, cfg.HiddenDropout, g)
	for _, l := range m.Layers {
		x = l.forward(t, x, cfg.NumAttentionHeads, cfg.LayernormEpsilon, cfg.HiddenDropout, cfg.AttentionDropout, g)
	}
	x = nn.LayerNorm(t, x, m.FinalLayernormW.Var, m.FinalLayernormB.Var, cfg.LayernormEpsilon)
	logits := nn.Linear(t, x, m.WordEmbeddings.Var, nil)
	if labels == nil {
		return logits, t.Err()
	}
	logits = autograd.View(t, logits, s*b, cfg.VocabSize)
	losses := nn.CrossEntropy(t, logits, SequenceFirst(labels, b, s))
	return losses, t.Err()
}

func (l *Layer) forward(t *autograd.Tape, x *autograd.Var, heads int, eps, hidden, attn float32, g *rng.RNG) *autograd.Var {
	y := nn.LayerNorm(t, x, l.InputLayernormW.Var, l.InputLayernormB.Var, eps)
	y = nn.Linear(t, y, l.QKVWeight.Var, l.QKVBias.Var)
	y = nn.CausalAttention(t, y, heads, attn, g)
	y = nn.Linear(t, y, l.ProjWeight.Var, l.ProjBias.Var)
	y = nn.Dropout(t, y, hidden, g)
	x = autograd.Add(t, x, y)
	y = nn.LayerNorm(t, x, l.PreMLPLayernormW.Var, l.PreMLPLayernormB.Var, eps)
	y = nn.Linear(t, y, l.FC1Weight.Var, nil)
	y = nn.BiasGELU(t, y, l.FC1Bias.Var)
	y = nn.Linear(t, y, l.FC2Weight.Var, l.FC2Bias.Var)
	y = nn.Dropout(t, y, hidden, g)
	return autograd.Add(t, x, y)
}

// SequenceFirst reorders a row-major [b, s] array into [s, b] order.
func SequenceFirst[T any](x []T, b, s int) []T {
	out := make([]T, len(x))
	for j := 0; j < b; j++ {
		for i := 0; i < s; i++ {
			out[i*b+j] = x[j*s+i]
		}
	}
	return out
}
