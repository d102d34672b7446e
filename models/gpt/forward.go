package gpt

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tensor/rng"
	"github.com/gotron/gotron/tp"
)

// Randomness holds the generators dropout draws from.
//
// Default is the rank's default stream: identical on the ranks of a
// tensor-parallel group, it drives dropout on activations every TP rank
// holds whole (the embeddings and the residual stream without sequence
// parallelism), so the replicas stay equal. Tracker's model-parallel-rng
// stream differs per TP rank and drives dropout on what each rank holds
// alone: attention probabilities of its heads, and under sequence
// parallelism its sequence shard. With Tracker nil, Default drives all.
//
// A nil *Randomness means no dropout (evaluation).
type Randomness struct {
	Default *rng.RNG
	Tracker *tp.RNGStatesTracker
	// Counter makes the hidden dropout (the embedding's and each layer's
	// two) counter-based: an element's mask is a pure function of Key, the
	// layer, the site, the sample's place in the data (Inputs.Samples), the
	// token's place in the whole sequence and the hidden index
	// (kernels.DropoutAt), the same under every parallel layout, micro-batch
	// size and recomputation. ForwardInputs needs Inputs.Samples then.
	Counter bool
	Key     uint64
}

// modelParallel returns the generator of the model-parallel stream.
func (r *Randomness) modelParallel() (*rng.RNG, error) {
	if r == nil {
		return nil, nil
	}
	if r.Tracker == nil {
		return r.Default, nil
	}
	return r.Tracker.Get(tp.ModelParallelRNG)
}

// Forward runs the chunk on a micro-batch.
//
// A chunk with the embedding (Spec.PreProcess) reads token ids [b, s]
// (row-major, as data batches hold them); one without it reads the hidden
// states given by SetInputTensor ([s, b, h], or [s/tp, b, h] under sequence
// parallelism) and ignores ids. A chunk without the head returns its hidden
// states in that shape. A chunk with the head (Spec.PostProcess) returns
// the per-token losses against labels [b, s], as a [s·b] vector in
// sequence-first order (token (i, j) of row j at position i is element
// i·b + j); under sequence parallelism too, every TP rank returns all s·b
// losses. With labels nil it returns the logits [s, b, V] over the real
// vocabulary instead, gathered over TP. r drives dropout (nil: none;
// ignored when the tape is not recording).
//
// Under context parallelism (m.CP of size cp > 1), s is the rank's tokens
// of each sequence, s_full/cp: ids and labels are cp.Split's parts, the
// hidden states are [s, b, h] of those rows, and the losses are theirs.
//
// ForwardInputs also takes per-token position ids and document segments
// (packed sequences).
func (m *Model) Forward(t *autograd.Tape, ids, labels []int32, b, s int, r *Randomness) (*autograd.Var, error) {
	return m.ForwardWith(t, ids, labels, b, s, r, nil)
}

// ForwardWith is Forward with the pipeline schedule's per-microbatch
// recompute choice (Megatron's checkpoint_activations_microbatch, from
// num_microbatches_with_partial_activation_checkpoints): when checkpoint is
// non-nil and false, this microbatch's layers keep their activations even
// though full recompute is configured.
func (m *Model) ForwardWith(t *autograd.Tape, ids, labels []int32, b, s int, r *Randomness, checkpoint *bool) (*autograd.Var, error) {
	return m.ForwardInputs(t, Inputs{IDs: ids, Labels: labels, Rows: b, Seq: s}, r, checkpoint)
}

// ForwardInputs is ForwardWith on a micro-batch given as Inputs, which may
// also carry per-token position ids and document segments (Megatron's
// --reset-position-ids and --reset-attention-mask); with both nil it is
// ForwardWith, bit for bit.
func (m *Model) ForwardInputs(t *autograd.Tape, in Inputs, r *Randomness, checkpoint *bool) (*autograd.Var, error) {
	cfg := m.Config
	spec := m.Spec
	ids, labels, b, s := in.IDs, in.Labels, in.Rows, in.Seq
	if spec.PreProcess && len(ids) != b*s || spec.PostProcess && labels != nil && len(labels) != b*s {
		return nil, fmt.Errorf("gpt: %d ids and %d labels for a [%d, %d] micro-batch", len(ids), len(labels), b, s)
	}
	if full := s * m.CP.Size(); cfg.LearnedPositions() && in.PositionIDs == nil && full > cfg.MaxPositions() {
		return nil, fmt.Errorf("gpt: sequence length %d exceeds max_position_embeddings %d", full, cfg.MaxPositions())
	}
	if err := m.checkPacking(in); err != nil {
		return nil, err
	}
	if spec.PreProcess {
		if err := checkTokens("token id", ids, b, s, cfg.VocabSize); err != nil {
			return nil, err
		}
	}
	if spec.PostProcess {
		if err := checkTokens("label", labels, b, s, cfg.VocabSize); err != nil {
			return nil, err
		}
	}
	ws, sp := m.tpSize(), m.sequenceParallel()
	if sp && s%ws != 0 {
		return nil, fmt.Errorf("gpt: sequence length %d is not divisible by the %d tensor-parallel ranks that sequence parallelism splits it over", s, ws)
	}
	if !t.Recording() {
		r = nil
	}
	mp, err := r.modelParallel()
	if err != nil {
		return nil, err
	}
	stats := in.Stats
	if !t.Recording() {
		stats = nil
	}
	if stats != nil {
		*stats = ActivationStats{Start: t.ActivationBytes()}
	}
	// Dropout on what every TP rank holds whole uses the default stream;
	// on a rank's own sequence shard, the model-parallel one.
	var hidden *rng.RNG
	if r != nil {
		hidden = r.Default
		if sp {
			hidden = mp
		}
	}
	ps := &pass{r: r, hidden: hidden, mp: mp, segments: in.Segments, moeScale: in.MoEAuxLossScale,
		preHook: in.PreHook, postHook: in.PostHook, cpWait: in.CPWait}
	if r != nil && r.Counter {
		if len(in.Samples) != b {
			return nil, fmt.Errorf("gpt: counter-based dropout needs each row's sample index: %d of them for %d rows", len(in.Samples), b)
		}
		ps.keys = &dropoutKeys{key: r.Key, samples: in.Samples, pos: m.rowPositions(s)}
	}
	var x *autograd.Var
	if spec.PreProcess {
		if err := preHook(in.PreHook, nonNil(m.WordEmbeddings, m.PositionEmbeddings)...); err != nil {
			return nil, err
		}
		if x, err = m.embed(t, ids, in.PositionIDs, b, s, ps, embeddingLayer); err != nil {
			return nil, err
		}
		x = postHook(in.PostHook, x, nonNil(m.WordEmbeddings, m.PositionEmbeddings)...)
	} else {
		if x = m.input; x == nil {
			return nil, fmt.Errorf("gpt: the model chunk of decoder layers [%d, %d) has no embedding and no input tensor: call SetInputTensor before Forward", spec.LayerOffset, spec.LayerOffset+spec.NumLayers)
		}
		parts := 1
		if spec.AfterMTP && in.MTP != nil {
			parts += len(in.MTP) // the depths' states follow the main ones
		}
		if err := m.checkInput(x, b, s, parts); err != nil {
			return nil, err
		}
	}
	if stats != nil {
		stats.AfterEmbedding = t.ActivationBytes()
	}
	if ps.rope, ps.ropeRows, err = m.rotaryOf(s, b, in.PositionIDs); err != nil {
		return nil, err
	}
	recompute := checkpoint == nil || *checkpoint
	x = m.decoder(t, x, ps, stats, recompute)
	if err := t.Err(); err != nil || m.FinalLayernormW == nil && !spec.MTP && !spec.PostProcess {
		return x, err
	}
	tailParams := nonNil(m.FinalLayernormW, m.FinalLayernormB)
	if spec.PostProcess {
		tailParams = append(tailParams, m.OutputLayerWeight())
	}
	if spec.MTP && !slices.Contains(tailParams, m.WordEmbeddings) {
		tailParams = append(tailParams, m.WordEmbeddings) // the depths embed with it
	}
	if err := preHook(in.PreHook, tailParams...); err != nil {
		return nil, err
	}
	y, err := m.tail(t, x, labels, in, ps, stats, recompute)
	if err != nil {
		return nil, err
	}
	return postHook(in.PostHook, y, tailParams...), t.Err()
}

// tail runs what follows the chunk's decoder layers: the final layernorm
// (when the chunk holds it, config.TransformerConfig.HoldsFinalNorm), the MTP depths (Spec.MTP, given in.MTP) and the head
// (Spec.PostProcess). A chunk with the depths but not the head returns the
// main hidden states followed by each depth's along the sequence; a head
// after them (Spec.AfterMTP) splits its input so.
func (m *Model) tail(t *autograd.Tape, x *autograd.Var, labels []int32, in Inputs, ps *pass, stats *ActivationStats, recompute bool) (*autograd.Var, error) {
	spec := m.Spec
	if m.FinalLayernormW != nil {
		x = m.norm(t, x, m.FinalLayernormW, m.FinalLayernormB)
	}
	if !spec.PostProcess {
		if !spec.MTP || in.MTP == nil {
			return x, t.Err()
		}
		parts := []*autograd.Var{x}
		err := m.mtpDepths(t, x, in, ps, recompute, func(_ int, h *autograd.Var) error {
			parts = append(parts, h)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return autograd.Cat(t, 0, parts...), t.Err()
	}
	var depths []*autograd.Var
	if spec.AfterMTP && in.MTP != nil {
		rows := x.Value.Dim(0) / (1 + len(in.MTP))
		for k := range 1 + len(in.MTP) {
			depths = append(depths, autograd.Narrow(t, x, 0, k*rows, rows))
		}
		x, depths = depths[0], depths[1:]
	}
	return m.head(t, x, labels, depths, in, ps, stats, recompute)
}

// checkInput checks the shape of the hidden states SetInputTensor gave:
// parts of s rows each along the sequence.
func (m *Model) checkInput(x *autograd.Var, b, s, parts int) error {
	rows := s
	if m.sequenceParallel() {
		rows = s / m.tpSize()
	}
	want := []int{parts * rows, b, m.Config.HiddenSize}
	if !slices.Equal(x.Shape(), want) {
		return fmt.Errorf("gpt: the input tensor of the model chunk of decoder layers [%d, %d) has shape %v, want %v", m.Spec.LayerOffset, m.Spec.LayerOffset+m.Spec.NumLayers, x.Shape(), want)
	}
	return nil
}

// embed looks up the word embeddings of ids [b, s], adds the position
// embeddings (of positions [b, s], or when nil of each row's sequence
// indices) and applies the embedding dropout: [s, b, h], or [s/tp, b, h]
// under sequence parallelism.
func (m *Model) embed(t *autograd.Tape, ids, positions []int32, b, s int, ps *pass, layer int) (*autograd.Var, error) {
	x, err := m.Embedding.Forward(t, SequenceFirst(ids, b, s), s, b)
	if err != nil {
		return nil, err
	}
	if m.PositionEmbeddings == nil {
		return ps.dropout(t, x, m.Config.HiddenDropout, layer, siteEmbedding), nil
	}
	start := 0
	if m.sequenceParallel() {
		start = m.tpRank() * s / m.tpSize()
	}
	if positions != nil {
		// The rank's sequence rows [start, start + rows), every batch row.
		pos := SequenceFirst(positions, b, s)[start*b : (start+x.Value.Dim(0))*b]
		x = nn.AddTokenPositions(t, x, m.PositionEmbeddings.Var, pos)
	} else if n := m.CP.Size(); n > 1 {
		// The rank's rows are chunks r and 2·cp−1−r of the sequence.
		pos := cp.Positions(s*n, n, m.CP.Rank())
		x = nn.AddPositionsOf(t, x, m.PositionEmbeddings.Var, pos[start:start+x.Value.Dim(0)])
	} else {
		x = nn.AddPositionsAt(t, x, m.PositionEmbeddings.Var, start)
	}
	return ps.dropout(t, x, m.Config.HiddenDropout, layer, siteEmbedding), nil
}

// head runs the output layer on the normed x and returns the per-token
// losses against labels, or the logits when labels is nil (see Forward);
// with in.MTP given, the MTP depths' losses follow the main ones (see
// ForwardInputs): of the depths the chunk runs, or of depths, their
// hidden states from an earlier chunk.
func (m *Model) head(t *autograd.Tape, x *autograd.Var, labels []int32, depths []*autograd.Var, in Inputs, ps *pass, stats *ActivationStats, recompute bool) (*autograd.Var, error) {
	b, s := in.Rows, in.Seq
	if labels == nil {
		logits, err := m.logits(t, x)
		if err != nil {
			return nil, err
		}
		full := tp.GatherFromTensorModelParallelRegion(t, logits, m.TP) // [s, b, V_pad]
		if v := m.Config.VocabSize; m.Config.PaddedVocabSize() != v {
			full = autograd.Narrow(t, full, 2, 0, v)
		}
		return full, t.Err()
	}
	losses, err := m.outputLoss(t, x, labels, b, s)
	if stats != nil {
		stats.AfterHead, stats.AfterLoss = t.ActivationBytes(), t.ActivationBytes()
	}
	if err != nil || in.MTP == nil || m.Config.MTPNumLayers == 0 {
		return losses, err
	}
	var more []*autograd.Var
	loss := func(k int, h *autograd.Var) error {
		if err := checkTokens(fmt.Sprintf("MTP depth %d label", k), in.MTP[k].Labels, b, s, m.Config.VocabSize); err != nil {
			return err
		}
		l, err := m.outputLoss(t, h, in.MTP[k].Labels, b, s)
		if stats != nil {
			stats.AfterMTP = append(stats.AfterMTP, t.ActivationBytes())
		}
		more = append(more, l)
		return err
	}
	if m.Spec.MTP {
		err = m.mtpDepths(t, x, in, ps, recompute, loss)
	} else {
		for k, h := range depths {
			if err = loss(k, h); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if stats != nil {
		stats.AfterLoss = t.ActivationBytes()
	}
	return autograd.Cat(t, 0, append([]*autograd.Var{losses}, more...)...), t.Err()
}

// logits runs the output layer on the normed x: [s, b, V_pad/tp].
func (m *Model) logits(t *autograd.Tape, x *autograd.Var) (*autograd.Var, error) {
	var w *autograd.Var // tied: the word embedding's weight
	if m.OutputWeight == nil {
		w = m.WordEmbeddings.Var
	}
	logits, _, err := m.Output.Forward(t, x, w, nil)
	return logits, err
}

// outputLoss returns the per-token losses [s·b] (sequence-first) of the
// output layer on the normed x against labels [b, s].
func (m *Model) outputLoss(t *autograd.Tape, x *autograd.Var, labels []int32, b, s int) (*autograd.Var, error) {
	logits, err := m.logits(t, x)
	if err != nil {
		return nil, err
	}
	logits = autograd.View(t, logits, s*b, logits.Value.Dim(2))
	losses := tp.VocabParallelCrossEntropy(t, logits, SequenceFirst(labels, b, s), tp.CrossEntropyOptions{
		Group: m.TP, VocabSize: m.Config.VocabSize,
	})
	return losses, t.Err()
}

// checkTokens reports the first of ids [b, s] outside the real vocabulary
// [0, V): the padding rows of the embedding are never looked up, and the
// loss has no ignore index (mask tokens with the loss mask instead).
func checkTokens(what string, ids []int32, b, s, v int) error {
	for i, id := range ids {
		if id < 0 || int(id) >= v {
			return fmt.Errorf("gpt: %s %d at row %d, position %d is outside the vocabulary [0, %d); check the data and --vocab-size (mask positions with the loss mask, not out-of-range labels)", what, id, i/s, i%s, v)
		}
	}
	return nil
}

// sequenceParallel reports whether the model runs sequence parallel.
func (m *Model) sequenceParallel() bool { return m.Config.SequenceParallel && m.tpSize() > 1 }

// decoder runs the transformer layers, checkpointing them as the full
// recompute settings say when recompute is set.
func (m *Model) decoder(t *autograd.Tape, x *autograd.Var, ps *pass, stats *ActivationStats, recompute bool) *autograd.Var {
	cfg := m.Config
	n := len(m.Layers)
	record := func(k int) {
		if stats != nil {
			for ; k > 0; k-- {
				stats.AfterLayer = append(stats.AfterLayer, t.ActivationBytes())
			}
		}
	}
	for i := 0; i < n; {
		start, chunk := cfg.RecomputeLayer(i, n)
		plain := !start || !recompute || !t.Recording()
		if plain {
			chunk = 1
		}
		var used []*nn.Parameter
		for _, l := range m.Layers[i : i+chunk] {
			used = append(used, l.parameters()...)
		}
		if err := preHook(ps.preHook, used...); err != nil {
			t.Fail(err)
			return x
		}
		if plain {
			x = postHook(ps.postHook, m.Layers[i].forward(t, x, m, ps), used...)
			record(1)
			i++
			continue
		}
		layers := m.Layers[i : i+chunk]
		x = tp.Checkpoint(t, func(t *autograd.Tape, args []*autograd.Var) (*autograd.Var, error) {
			y := args[0]
			for _, l := range layers {
				y = l.forward(t, y, m, ps)
			}
			return y, t.Err()
		}, m.checkpointOptions(ps.r), x)
		x = postHook(ps.postHook, x, used...)
		record(chunk)
		i += chunk
	}
	return x
}

// postHook runs a pass's post-hook h (Inputs.PostHook), if any, on the
// part's output y and its parameters ps.
func postHook(h func([]*nn.Parameter, *autograd.Var) *autograd.Var, y *autograd.Var, ps ...*nn.Parameter) *autograd.Var {
	if h == nil {
		return y
	}
	return h(ps, y)
}

// FSDPUnits returns the model's Megatron-FSDP units: each decoder layer's
// parameters, in layer order (the reference's default fsdp_unit_modules,
// its transformer layers), then each MTP depth's. The embeddings, the
// final norm and the output layer belong to no unit.
func (m *Model) FSDPUnits() [][]*nn.Parameter {
	out := make([][]*nn.Parameter, 0, len(m.Layers)+len(m.MTP))
	for _, l := range m.Layers {
		out = append(out, l.parameters())
	}
	for _, l := range m.MTP {
		out = append(out, l.parameters())
	}
	return out
}

// preHook runs a pass's pre-hook h (Inputs.PreHook), if any, on ps.
func preHook(h func([]*nn.Parameter) error, ps ...*nn.Parameter) error {
	if h == nil {
		return nil
	}
	return h(ps)
}

// parameters returns the layer's parameters.
func (l *Layer) parameters() []*nn.Parameter {
	ps := nonNil(l.InputLayernormW, l.InputLayernormB)
	if l.MLA != nil {
		ps = append(ps, l.MLA.parameters()...)
	} else {
		ps = append(ps, l.QKV.Parameters()...)
	}
	ps = append(ps, nonNil(l.QLayernormW, l.QLayernormB, l.KLayernormW, l.KLayernormB)...)
	ps = append(ps, l.Proj.Parameters()...)
	ps = append(ps, nonNil(l.PreMLPLayernormW, l.PreMLPLayernormB)...)
	if l.MoE != nil {
		return append(ps, l.MoE.Parameters()...)
	}
	ps = append(ps, l.FC1.Parameters()...)
	return append(ps, l.FC2.Parameters()...)
}

// nonNil returns ps without its nil entries (absent biases and norms).
func nonNil(ps ...*nn.Parameter) []*nn.Parameter {
	out := ps[:0:0]
	for _, p := range ps {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// checkpointOptions are the recompute settings of a checkpointed region:
// every generator dropout may draw from is snapshotted and replayed.
func (m *Model) checkpointOptions(r *Randomness) tp.CheckpointOptions {
	o := tp.CheckpointOptions{
		DistributeSavedActivations: m.Config.DistributeSavedActivations,
		Group:                      m.TP,
	}
	if r != nil {
		o.Tracker, o.Default = r.Tracker, r.Default
	}
	return o
}

// pass is what every layer of one forward pass shares: the generators
// (r's are what recompute replays; hidden drives dropout after
// linear_proj and linear_fc2, mp attention dropout), the rotary table of
// the pass's positions (nil without RoPE) with, for per-token position
// ids, each token's row of it (sequence-first), and the micro-batch's
// document segments (nil: causal attention over whole rows).
type pass struct {
	r          *Randomness
	hidden, mp *rng.RNG
	keys       *dropoutKeys // Randomness.Counter's
	rope       *kernels.RotaryTable
	ropeRows   []int32
	segments   []int32
	moeScale   float32                                            // Inputs.MoEAuxLossScale
	preHook    func([]*nn.Parameter) error                        // Inputs.PreHook
	postHook   func([]*nn.Parameter, *autograd.Var) *autograd.Var // Inputs.PostHook
	cpWait     *atomic.Int64                                      // Inputs.CPWait
}

// forward runs one layer on x ([s, b, h], or [s/tp, b, h] under sequence
// parallelism):
//
//	y = norm1(x);  x = (y if post-LN residual else x) + dropout(proj(attention(qkv(y))))
//	y = norm2(x);  x = (y if post-LN residual else x) + dropout(fc2(act(fc1(y))))
func (l *Layer) forward(t *autograd.Tape, x *autograd.Var, m *Model, ps *pass) *autograd.Var {
	cfg := m.Config
	y := m.norm(t, x, l.InputLayernormW, l.InputLayernormB)
	residual := x
	if cfg.ApplyResidualConnectionPostLayernorm {
		residual = y
	}
	qkv, err := l.attentionInput(t, y, m, ps) // [s, b, n·3·d/tp]
	if err != nil {
		t.Fail(err)
		return y
	}
	y = l.attention(t, qkv, m, ps) // [s, b, n·d/tp]
	if l.MLA != nil {
		a := cfg.MLA
		y = mlaValues(t, y, cfg.NumAttentionHeads/m.tpSize(), mlaHeadDim(a), a.VHeadDim) // [s, b, n·v/tp]
	}
	y, _, err = l.Proj.Forward(t, y) // [s, b, h], or [s/tp, b, h] under SP
	if err != nil {
		t.Fail(err)
		return y
	}
	y = ps.dropout(t, y, cfg.HiddenDropout, l.Number, siteAttention)
	x = autograd.Add(t, residual, y)
	y = m.norm(t, x, l.PreMLPLayernormW, l.PreMLPLayernormB)
	residual = x
	if cfg.ApplyResidualConnectionPostLayernorm {
		residual = y
	}
	if l.MoE != nil {
		scale := ps.moeScale
		if scale == 0 {
			scale = 1
		}
		if y, err = l.MoE.Forward(t, y, scale); err != nil {
			t.Fail(err)
			return y
		}
		y = ps.dropout(t, y, cfg.HiddenDropout, l.Number, siteMLP)
		return autograd.Add(t, residual, y)
	}
	y, bias, err := l.FC1.Forward(t, y, nil, nil) // [s, b, ffn/tp] (gated: 2·ffn/tp), bias or nil
	if err != nil {
		t.Fail(err)
		return y
	}
	y = nn.MLPActivation(t, y, bias, activation(cfg), cfg.GatedLinearUnit)
	y, _, err = l.FC2.Forward(t, y)
	if err != nil {
		t.Fail(err)
		return y
	}
	y = ps.dropout(t, y, cfg.HiddenDropout, l.Number, siteMLP)
	return autograd.Add(t, residual, y)
}

// attentionInput returns the attention core's input for the normed y:
// linear_qkv's output regrouped (PrepareQKV: q/k norms, RoPE), or MLA's.
func (l *Layer) attentionInput(t *autograd.Tape, y *autograd.Var, m *Model, ps *pass) (*autograd.Var, error) {
	if l.MLA != nil {
		return l.MLA.qkv(t, y, m, ps)
	}
	qkv, _, err := l.QKV.Forward(t, y, nil, nil) // [s, b, (n + 2g)·d/tp]
	if err != nil {
		return nil, err
	}
	return nn.PrepareQKV(t, qkv, m.qkvLayout(), l.qkvOptions(m, ps)), nil
}

// attention runs the attention core on the multi-head qkv [s, b, n·3·d/tp]
// (under selective recompute, checkpointed) and returns the context
// [s, b, n·d/tp].
func (l *Layer) attention(t *autograd.Tape, qkv *autograd.Var, m *Model, ps *pass) *autograd.Var {
	cfg := m.Config
	heads := cfg.NumAttentionHeads / m.tpSize()
	// The attention's GEMMs run in the precision of the layer's weights.
	prec := l.Proj.Weight.Value.DType()
	keys := ps.attentionKeys(m, l.Number, qkv.Value.Dim(0)*m.CP.Size(), heads)
	attend := func(t *autograd.Tape, qkv *autograd.Var) *autograd.Var {
		if m.CP.Size() > 1 {
			return cp.Attention(t, qkv, heads, cp.Options{
				Type: cp.CommType(cfg.LayerCPCommType(l.Number)), Groups: m.CP,
				Dropout: cfg.AttentionDropout, RNG: ps.mp, Keys: keys, DType: prec, Wait: ps.cpWait,
				Segments: ps.segments,
			})
		}
		return nn.Attention(t, qkv, heads, nn.AttentionOptions{
			DType: prec, Dropout: cfg.AttentionDropout, RNG: ps.mp, Keys: keys, Segments: ps.segments,
		})
	}
	if cfg.RecomputeGranularity == "selective" && t.Recording() {
		return tp.Checkpoint(t, func(t *autograd.Tape, args []*autograd.Var) (*autograd.Var, error) {
			return attend(t, args[0]), t.Err()
		}, m.checkpointOptions(ps.r), qkv)
	}
	return attend(t, qkv)
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
