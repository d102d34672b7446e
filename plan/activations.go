package plan

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/moe"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
	"github.com/gotron/gotron/tp"
)

// Row is one layout of a MeasureActivations report: rank 0's
// activation memory for one micro-batch, in bytes.
type Row struct {
	// Layout names the layout ("TP 4 + SP + selective", say).
	Layout string
	// Config is the model config the row ran.
	Config config.TransformerConfig
	// PerLayer is the measured bytes one transformer layer keeps (the
	// mean over the layers); Estimate is gotron's formula
	// (gpt.EstimateActivations), its mean over the same layers.
	PerLayer, Estimate int64
	// Korthikanti is the per-layer formula of Korthikanti et al. 2022,
	// Table 2, in bytes of 16-bit activations; gotron keeps float32, so
	// compare Estimate with 2·Korthikanti less the terms gotron never
	// stores (see docs/MEMORY.md). 0 for a MoE model.
	Korthikanti float64
	// EndOfForward is the whole model's activation memory at the end of
	// forward (its MTP depths' included); Peak the largest during forward
	// and backward; EstimateTotal gotron's formula for EndOfForward.
	EndOfForward, Peak, EstimateTotal int64
}

// memoryLayouts are the layouts MeasureActivations compares, on t ranks.
func memoryLayouts(base config.TransformerConfig, t int) []struct {
	name string
	cfg  config.TransformerConfig
} {
	var out []struct {
		name string
		cfg  config.TransformerConfig
	}
	moe := base.NumMoEExperts > 0
	add := func(name string, tp int, sp bool, rc config.Recompute) bool {
		if moe && (tp > 1 && !sp || rc.RecomputeGranularity == "full") {
			return false // MoE needs SP under TP and refuses full recompute
		}
		c := base
		c.TensorModelParallelSize, c.SequenceParallel, c.Recompute = tp, sp, rc
		c.ContextParallelSize, c.HierarchicalContextParallelSizes, c.CPCommType = 1, nil, nil
		c.ExpertModelParallelSize, c.ExpertTensorParallelSize = 1, 0 // every expert on each rank, split over its TP
		out = append(out, struct {
			name string
			cfg  config.TransformerConfig
		}{name, c})
		return true
	}
	sel := config.Recompute{RecomputeGranularity: "selective"}
	full := config.Recompute{RecomputeGranularity: "full", RecomputeMethod: "uniform", RecomputeNumLayers: 1}
	add("one rank", 1, false, config.Recompute{})
	if t > 1 {
		add(fmt.Sprintf("TP %d", t), t, false, config.Recompute{})
		add(fmt.Sprintf("TP %d + SP", t), t, true, config.Recompute{})
		add(fmt.Sprintf("TP %d + selective", t), t, false, sel)
		add(fmt.Sprintf("TP %d + SP + selective", t), t, true, sel)
		add(fmt.Sprintf("TP %d + full", t), t, false, full)
		add(fmt.Sprintf("TP %d + SP + full", t), t, true, full)
	} else {
		add("one rank + selective", 1, false, sel)
		add("one rank + full", 1, false, full)
	}
	if n := base.ContextParallelSize; n > 1 {
		typ := base.LayerCPCommType(0)
		cpAdd := func(name string, tp int, sp bool, rc config.Recompute) {
			if add(name, tp, sp, rc) {
				c := &out[len(out)-1].cfg
				c.ContextParallelSize, c.HierarchicalContextParallelSizes, c.CPCommType = n, base.HierarchicalContextParallelSizes, base.CPCommType
			}
		}
		cpAdd(fmt.Sprintf("CP %d (%s)", n, typ), 1, false, config.Recompute{})
		cpAdd(fmt.Sprintf("CP %d + selective", n), 1, false, sel)
		cpAdd(fmt.Sprintf("CP %d + full", n), 1, false, full)
		if t > 1 {
			cpAdd(fmt.Sprintf("TP %d + SP + CP %d", t, n), t, true, config.Recompute{})
		}
	}
	return out
}

// Korthikanti returns the activation memory of one transformer layer per
// rank in bytes of 16-bit activations by Korthikanti et al. 2022 (arXiv
// 2205.05198), Table 2, for micro-batch b under cfg, with s the rank's
// s/cp tokens under context parallelism (which the paper predates):
//
//	no parallelism            sbh·(34 + 5as/h)
//	tensor parallel           sbh·(10 + 24/t + 5as/(ht))
//	tensor + sequence         sbh/t·(34 + 5as/h)
//	tensor + selective        sbh·(10 + 24/t)
//	tensor + sequence + sel.  sbh·34/t
//	full recompute            2sbh (the layer's input)
func Korthikanti(cfg config.TransformerConfig, b int) float64 {
	s, h, a := float64(cfg.SeqLength/max(cfg.ContextParallelSize, 1)), float64(cfg.HiddenSize), float64(cfg.NumAttentionHeads)
	t := float64(max(cfg.TensorModelParallelSize, 1))
	sbh := s * float64(b) * h
	sp := cfg.SequenceParallel && t > 1
	attn := 5 * a * s / h
	if cfg.RecomputeGranularity == "selective" {
		attn = 0
	}
	switch {
	case cfg.RecomputeGranularity == "full":
		return 2 * sbh
	case sp:
		return sbh / t * (34 + attn)
	default:
		return sbh * (10 + 24/t + attn/t)
	}
}

// MeasureActivations runs one micro-batch of b rows of model forward and
// backward in each layout of memoryLayouts (one rank, and TP t with and
// without sequence parallelism, selective and full recompute, where t is
// model's tensor-model-parallel size; CP n alone and with them when
// model's context-parallel size is n) on in-process ranks, its weights,
// data and dropout drawn from seed, and reports rank 0's measured
// activation memory beside gotron's and Korthikanti et al.'s formulas.
// A MoE model's layouts hold every expert on each rank (EP 1), split over
// the layout's TP (expert_tensor_parallel_size t), so that the rows its
// experts keep follow from the config, not from the routing; they leave
// out TP without SP and full recompute, which MoE refuses, and
// Korthikanti (a dense layer's) is 0.
func MeasureActivations(ctx context.Context, model config.TransformerConfig, b int, seed uint64) ([]Row, error) {
	if model.VocabSize == 0 {
		model.VocabSize = 256
	}
	var rows []Row
	for _, l := range memoryLayouts(model, max(model.TensorModelParallelSize, 1)) {
		if err := l.cfg.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		row := Row{Layout: l.name, Config: l.cfg, Estimate: meanLayer(l.cfg, b), Korthikanti: Korthikanti(l.cfg, b),
			EstimateTotal: gpt.EstimateActivations(l.cfg, b).Total}
		if l.cfg.NumMoEExperts > 0 {
			row.Korthikanti = 0 // the paper's layers are dense
		}
		n := max(l.cfg.TensorModelParallelSize, 1) * max(l.cfg.ContextParallelSize, 1)
		err := local.NewWorld(n, comm.Options{}).Run(ctx, func(ctx context.Context, w comm.Group) error {
			return measureRank(ctx, w, l.cfg, b, seed, &row)
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// meanLayer is gotron's formula for a decoder layer of cfg, the mean over
// its layers (MoE and dense ones differ).
func meanLayer(cfg config.TransformerConfig, b int) int64 {
	e := gpt.EstimateActivations(cfg, b)
	return (e.Total - e.Embedding - e.Head - int64(cfg.MTPNumLayers)*e.MTP) / int64(max(cfg.NumLayers, 1))
}

// measureRank is one rank of a layout of MeasureActivations: one
// micro-batch of b rows forward and backward through model cfg, and, on
// rank 0, the activation memory per layer, at the end of the forward pass
// and at its peak into row.
func measureRank(ctx context.Context, w comm.Group, cfg config.TransformerConfig, b int, seed uint64, row *Row) error {
	groups, err := mesh.Initialize(ctx, w, mesh.Sizes{TP: max(cfg.TensorModelParallelSize, 1), PP: 1, CP: max(cfg.ContextParallelSize, 1),
		EP: 1, ETP: max(cfg.EffectiveExpertTensorParallelSize(), 1)})
	if err != nil {
		return err
	}
	g := groups.TP()
	var cpg *cp.Groups
	if cfg.ContextParallelSize > 1 {
		if cpg, err = cp.NewGroups(ctx, groups.CP(), cfg.HierarchicalContextParallelSizes); err != nil {
			return err
		}
	}
	experts := moe.Parallel{EP: groups.Get(mesh.GroupEP), ETP: groups.Get(mesh.GroupExptTP), TPEP: groups.Get(mesh.GroupTPEP), TPCP: groups.Get(mesh.GroupTPCP)}
	m, err := gpt.NewParallel(cfg, rng.New(seed), g, gpt.WithContextParallel(cpg), gpt.WithExperts(experts))
	if err != nil {
		return err
	}
	tracker, def, err := tp.ModelParallelManualSeed(seed+1+uint64(m.CP.Rank()), g.Rank(), 0, 0)
	if err != nil {
		return err
	}
	var st gpt.ActivationStats
	tape := autograd.NewTape(ctx)
	full := data.MockDataset{Seed: seed, Vocab: cfg.VocabSize, Seq: cfg.SeqLength}.Batch(data.ConstantStep(0, b), 0, b)
	mb := gpt.SplitBatch(full, m.CP)
	var mtp []gpt.MTPInputs
	for k := range cfg.MTPNumLayers {
		d := gpt.SplitBatch(gpt.MTPBatch(full, k), m.CP)
		mtp = append(mtp, gpt.MTPInputs{IDs: d.InputIDs, Labels: d.Labels})
	}
	losses, err := m.ForwardInputs(tape, gpt.Inputs{IDs: mb.InputIDs, Labels: mb.Labels, Rows: mb.Rows, Seq: mb.Seq, Stats: &st, MTP: mtp},
		&gpt.Randomness{Default: def, Tracker: tracker}, nil)
	if err != nil {
		return err
	}
	// Every per-token loss, the MTP depths' too, with weight 1: the memory
	// does not depend on the weights.
	if err := autograd.Backward(tape, autograd.WeightedSum(tape, losses, tensor.Full(1, losses.Value.Len())), nil); err != nil {
		return err
	}
	if w.Rank() == 0 {
		row.PerLayer = (st.AfterLayer[len(st.AfterLayer)-1] - st.AfterEmbedding) / int64(len(st.AfterLayer))
		row.EndOfForward = st.AfterLoss - st.Start
		row.Peak = tape.PeakActivationBytes()
	}
	return nil
}
