package gpt

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tp"
)

// MTPLayer is one multi-token-prediction depth (Megatron's
// MultiTokenPredictionLayer, mtp.layers.{k}; DeepSeek-V3 §2.2). Depth k
// (from 0) takes the hidden states h of the depth before it (the decoder's,
// after the final layernorm, for k = 0) and the embedding e of the input
// ids rolled left by k + 1, and computes
//
//	h' = final_layernorm(layer(eh_proj([enorm(e); hnorm(h)])))
//
// whose logits through the shared output layer predict the labels rolled
// left by k + 1: position i's depth-k output predicts the token k + 2
// places after it.
type MTPLayer struct {
	Depth          int
	EnormW, EnormB *nn.Parameter // mtp.layers.{k}.enorm [h]
	HnormW, HnormB *nn.Parameter // mtp.layers.{k}.hnorm [h]
	// EHProj is eh_proj [h/tp, 2h]: column-parallel, no bias; its input is
	// the normed embedding, then the normed hidden states.
	EHProj *tp.ColumnParallelLinear
	// Layer is the transformer layer mtp.layers.{k}.mtp_model_layer: a MoE
	// layer when the decoder's last layer is one (the reference builds it
	// from the last layer's spec).
	Layer                            *Layer
	FinalLayernormW, FinalLayernormB *nn.Parameter // mtp.layers.{k}.final_layernorm [h]
}

// MTPInputs are what depth k of multi-token prediction reads (MTPBatch):
// the input ids and labels rolled left by k + 1, [Rows, Seq] row-major as
// Inputs.IDs.
type MTPInputs struct {
	IDs, Labels []int32
}

// MTPBatch returns the batch depth k (from 0) of multi-token prediction
// reads: b's input ids, labels and loss mask rolled left by k + 1 along
// every row, the positions rolled in from beyond the row being 0 (the
// reference's roll_tensor with shifts −1, applied k + 1 times, which
// zero-fills; the loss mask's zeros mask them out). Roll the whole rows
// before cp.Split: the roll then crosses the context-parallel ranks as the
// reference's does. Position ids and segments are not rolled: the depth's
// attention uses the main pass's (rotary positions and document masks),
// as the reference's does.
func MTPBatch(b data.Batch, k int) data.Batch {
	out := b
	out.InputIDs = roll(b.InputIDs, b.Rows, b.Seq, k+1)
	out.Labels = roll(b.Labels, b.Rows, b.Seq, k+1)
	out.LossMask = roll(b.LossMask, b.Rows, b.Seq, k+1)
	return out
}

// roll shifts every row of the row-major x [rows, seq] left by n,
// filling the last n places with zeros.
func roll[T int32 | float32](x []T, rows, seq, n int) []T {
	out := make([]T, len(x))
	for r := range rows {
		if n < seq {
			copy(out[r*seq:(r+1)*seq-n], x[r*seq+n:(r+1)*seq])
		}
	}
	return out
}

// mtpIsMoE reports whether the MTP depths' layers are MoE layers: when the
// decoder's last layer is one.
func mtpIsMoE(cfg config.TransformerConfig) bool { return cfg.IsMoELayer(cfg.NumLayers - 1) }

// mtpPrefix is depth k's parameter prefix.
func mtpPrefix(k int) string { return fmt.Sprintf("mtp.layers.%d.", k) }

// mtpDraws is the number of normal deviates the MTP depths draw: per depth
// eh_proj [h, 2h], then its layer's (layerDrawsOf).
func mtpDraws(cfg config.TransformerConfig) int {
	h := cfg.HiddenSize
	return cfg.MTPNumLayers * (2*((2*h*h+1)/2) + layerDrawsOf(cfg, mtpIsMoE(cfg)))
}

// mtp builds the chunk's MTP depths (after the decoder's final layernorm,
// before an untied output layer, as the reference's GPTModel builds its
// mtp block), or passes over their draws when the chunk holds none.
func (b *builder) mtp(spec ChunkSpec) error {
	cfg := b.cfg
	if !spec.MTP {
		b.skip(mtpDraws(cfg))
		return nil
	}
	h := cfg.HiddenSize
	for k := range cfg.MTPNumLayers {
		p := mtpPrefix(k)
		l := &MTPLayer{Depth: k}
		l.EnormW, l.EnormB = b.norm(p + "enorm")
		l.HnormW, l.HnormB = b.norm(p + "hnorm")
		var err error
		if l.EHProj, err = tp.NewColumnParallelLinear(p+"eh_proj", 2*h, h, tp.ColumnParallelConfig{
			Group: b.tpg, Init: b.initMethod(cfg.InitMethodStd), SequenceParallel: b.sp, UnfusedWeightGrad: b.unfused,
		}); err != nil {
			return err
		}
		b.m.add(l.EHProj.Parameters()...)
		if l.Layer, err = b.layerAt(p+"mtp_model_layer.", cfg.NumLayers+k, mtpIsMoE(cfg)); err != nil {
			return err
		}
		l.FinalLayernormW, l.FinalLayernormB = b.norm(p + "final_layernorm")
		b.m.MTP = append(b.m.MTP, l)
	}
	return nil
}

// parameters returns the depth's parameters in registration order.
func (l *MTPLayer) parameters() []*nn.Parameter {
	ps := nonNil(l.EnormW, l.EnormB, l.HnormW, l.HnormB)
	ps = append(ps, l.EHProj.Parameters()...)
	ps = append(ps, l.Layer.parameters()...)
	return append(ps, nonNil(l.FinalLayernormW, l.FinalLayernormB)...)
}

// forward runs depth l on the previous depth's hidden states h ([s, b, h],
// or [s/tp, b, h] under sequence parallelism, normed) and the rolled ids
// [b, s]; it returns the depth's hidden states, normed, shaped as h. Under
// full recompute (recompute true) the projection, the layer and the final
// norm are checkpointed, as the reference's _checkpointed_forward.
func (l *MTPLayer) forward(t *autograd.Tape, m *Model, h *autograd.Var, ids []int32, b, s int, ps *pass, recompute bool) (*autograd.Var, error) {
	e, err := m.embed(t, ids, nil, b, s, ps, l.Layer.Number)
	if err != nil {
		return nil, err
	}
	run := func(t *autograd.Tape, args []*autograd.Var) (*autograd.Var, error) {
		c := autograd.Cat(t, 2, m.norm(t, args[1], l.EnormW, l.EnormB), m.norm(t, args[0], l.HnormW, l.HnormB))
		y, err := m.wholeColumn(t, l.EHProj, c, true) // [s, b, h], [s/tp, b, h] under SP
		if err != nil {
			return nil, err
		}
		y = l.Layer.forward(t, y, m, ps)
		return m.norm(t, y, l.FinalLayernormW, l.FinalLayernormB), t.Err()
	}
	if recompute && m.Config.RecomputeGranularity == "full" && t.Recording() {
		return tp.Checkpoint(t, run, m.checkpointOptions(ps.r), h, e), t.Err()
	}
	return run(t, []*autograd.Var{h, e})
}

// mtpDepths runs the MTP depths on the decoder's normed output x and
// hands each depth's hidden states to each, in depth order (see
// ForwardInputs).
func (m *Model) mtpDepths(t *autograd.Tape, x *autograd.Var, in Inputs, ps *pass, recompute bool, each func(k int, h *autograd.Var) error) error {
	if len(in.MTP) != len(m.MTP) {
		return fmt.Errorf("gpt: the chunk holds %d MTP depths but the micro-batch gives inputs for %d (gpt.MTPBatch)", len(m.MTP), len(in.MTP))
	}
	b, s := in.Rows, in.Seq
	h := x
	for k, l := range m.MTP {
		if err := checkTokens(fmt.Sprintf("MTP depth %d token id", k), in.MTP[k].IDs, b, s, m.Config.VocabSize); err != nil {
			return err
		}
		used := l.parameters() // (the word embedding's hooks ran with the chunk's tail's)
		if err := preHook(ps.preHook, used...); err != nil {
			return err
		}
		var err error
		if h, err = l.forward(t, m, h, in.MTP[k].IDs, b, s, ps, recompute); err != nil {
			return err
		}
		h = postHook(ps.postHook, h, used...)
		if err := each(k, h); err != nil {
			return err
		}
	}
	return t.Err()
}
