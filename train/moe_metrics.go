package train

import (
	"context"
	"fmt"
	"math"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/moe"
)

// MoERecord is one iteration's MoE metrics in --log-json ("moe"): per MoE
// layer, in global layer order, the auxiliary losses as Megatron's tracker
// logs them (each loss divided by its coefficient, averaged over the
// iteration's microbatches and the data-parallel replicas) and the tokens
// the router sent to each expert over the whole global batch (after
// dropping).
type MoERecord struct {
	// Layers are the MoE layers' global indices (decoder.layers.{i}).
	Layers []int `json:"layers"`
	// LoadBalancingLoss (--moe-router-load-balancing-type aux_loss) or
	// SeqLoadBalancingLoss (seq_aux_loss) is the load-balancing loss of
	// each layer; neither is there with the type none or
	// --moe-aux-loss-coeff 0.
	LoadBalancingLoss    []float64 `json:"load_balancing_loss,omitempty"`
	SeqLoadBalancingLoss []float64 `json:"seq_load_balancing_loss,omitempty"`
	// ZLoss is the router's z loss of each layer (none with
	// --moe-z-loss-coeff 0).
	ZLoss []float64 `json:"z_loss,omitempty"`
	// TokensPerExpert holds, per layer, the tokens routed to each of the
	// --num-experts experts.
	TokensPerExpert [][]int64 `json:"tokens_per_expert"`
}

// moeMetricNames are the names of the losses a MoE model logs, in
// Megatron's order: the load-balancing loss ("load_balancing_loss", or
// "seq_load_balancing_loss" for seq_aux_loss) unless its type is none or
// its coefficient 0, then "z_loss" unless its coefficient is 0. lb and z
// say which are logged.
func moeMetricNames(m config.TransformerConfig) (lb string, z bool) {
	if m.MoEAuxLossCoeff > 0 && m.MoERouterLoadBalancingType != moe.NoBalance {
		lb = "load_balancing_loss"
		if m.MoERouterLoadBalancingType == moe.SeqAuxLoss {
			lb = "seq_load_balancing_loss"
		}
	}
	return lb, m.MoEZLossCoeff > 0
}

// moeLayerIndices are the global indices of the model's MoE layers (by
// the config alone: every rank knows them, whatever layers it holds).
func moeLayerIndices(m config.TransformerConfig) []int {
	var out []int
	for i := range m.NumLayers {
		if m.IsMoELayer(i) {
			out = append(out, i)
		}
	}
	return out
}

// moeStats are one rank's statistics of the model's MoE layers, every
// layer in the order of moeLayerIndices: zero for the layers the rank
// does not hold.
type moeStats struct {
	layers []int
	// lb and z are each layer's summed losses (moe.Stats.LoadBalancing
	// and Z); tokens each layer's E counts, layer-major.
	lb, z  []float64
	tokens []int64
	e      int
}

func newMoEStats(layers []int, experts int) *moeStats {
	return &moeStats{layers: layers, lb: make([]float64, len(layers)), z: make([]float64, len(layers)),
		tokens: make([]int64, len(layers)*experts), e: experts}
}

// add adds the statistics of the MoE layer with global index layer.
func (s *moeStats) add(layer int, st moe.Stats) error {
	i := -1
	for j, l := range s.layers {
		if l == layer {
			i = j
		}
	}
	if i < 0 {
		return fmt.Errorf("train: decoder layer %d holds a MoE layer, but the config's MoE layers are %v", layer, s.layers)
	}
	if len(st.Tokens) != 0 && len(st.Tokens) != s.e {
		return fmt.Errorf("train: MoE layer %d counted tokens for %d experts, but --num-experts is %d", layer, len(st.Tokens), s.e)
	}
	s.lb[i] += st.LoadBalancing
	s.z[i] += st.Z
	for e, n := range st.Tokens {
		s.tokens[i*s.e+e] += int64(math.Round(float64(n)))
	}
	return nil
}

// moeDivisors say how a world's summed statistics become the logged
// metrics: the load-balancing losses sum the tp×cp partials of each
// replica's microbatches (÷ dp·micro), the z losses are each rank's own
// mean (÷ tp·cp·dp·micro).
type moeDivisors struct {
	lb, z float64
}

// reduceMoEStats sums every rank's statistics over world (a collective:
// every rank calls it with statistics of the same shape) and returns the
// metrics on world rank 0 (nil elsewhere). The losses are gathered as
// float64 and added in rank order (exact and the same on every run); the
// token counts are summed as integers.
func reduceMoEStats(ctx context.Context, world comm.Group, s *moeStats, div moeDivisors, lbName string, z bool) (*MoERecord, error) {
	n := len(s.layers)
	mine := make([]int64, 2*n)
	for i := range n {
		mine[i], mine[n+i] = int64(math.Float64bits(s.lb[i])), int64(math.Float64bits(s.z[i]))
	}
	all := make([]int64, 2*n*world.Size())
	if err := world.AllGather(ctx, comm.I64(all), comm.I64(mine)); err != nil {
		return nil, fmt.Errorf("MoE metrics: gathering the auxiliary losses over %s: %w", world.Name(), err)
	}
	tokens := append([]int64(nil), s.tokens...)
	if err := world.AllReduce(ctx, comm.I64(tokens), comm.Sum); err != nil {
		return nil, fmt.Errorf("MoE metrics: summing the tokens per expert over %s: %w", world.Name(), err)
	}
	if world.Rank() != 0 {
		return nil, nil
	}
	lb, zl := make([]float64, n), make([]float64, n)
	for r := range world.Size() {
		part := all[2*n*r : 2*n*(r+1)]
		for i := range n {
			lb[i] += math.Float64frombits(uint64(part[i]))
			zl[i] += math.Float64frombits(uint64(part[n+i]))
		}
	}
	rec := &MoERecord{Layers: append([]int(nil), s.layers...)}
	for i := range n {
		lb[i] /= div.lb
		zl[i] /= div.z
		rec.TokensPerExpert = append(rec.TokensPerExpert, tokens[i*s.e:(i+1)*s.e])
	}
	switch lbName {
	case "load_balancing_loss":
		rec.LoadBalancingLoss = lb
	case "seq_load_balancing_loss":
		rec.SeqLoadBalancingLoss = lb
	}
	if z {
		rec.ZLoss = zl
	}
	return rec, nil
}

// resetMoEStats clears the statistics of the rank's MoE layers (at the
// start of every training iteration, so that an iteration's metrics hold
// its own forward passes only).
func (t *trainer) resetMoEStats() {
	for _, c := range t.chunks {
		for _, l := range c.MoELayers() {
			l.Stats.Reset()
		}
	}
}

// moeMetrics returns the metrics of the iteration just run on world rank
// 0 (nil elsewhere, and for a dense model) and clears the statistics. It
// is a collective over the world for a MoE model: every rank calls it,
// whether or not it holds MoE layers (a pipeline stage may hold none).
func (t *trainer) moeMetrics(ctx context.Context) (*MoERecord, error) {
	m := t.a.Model
	if m.NumMoEExperts <= 0 {
		return nil, nil
	}
	layers := moeLayerIndices(m)
	if len(layers) == 0 {
		return nil, nil
	}
	s := newMoEStats(layers, m.NumMoEExperts)
	for _, c := range t.chunks {
		for _, l := range c.Layers {
			if l.MoE == nil {
				continue
			}
			if err := s.add(l.Number, l.MoE.Stats); err != nil {
				return nil, err
			}
			l.MoE.Stats.Reset()
		}
	}
	dp, micro := float64(t.dp), float64(max(t.micro, 1))
	tpcp := float64(t.tp.Size() * max(m.ContextParallelSize, 1))
	lb, z := moeMetricNames(m)
	return reduceMoEStats(ctx, t.groups.World, s, moeDivisors{lb: dp * micro, z: tpcp * dp * micro}, lb, z)
}

// moeMeans are the means over the layers of a record's losses, as
// Megatron's console line gives them: name and value, in order.
func (r *MoERecord) moeMeans() []moeMean {
	var out []moeMean
	add := func(name string, v []float64) {
		if len(v) == 0 {
			return
		}
		var s float64
		for _, x := range v {
			s += x
		}
		out = append(out, moeMean{name, s / float64(len(v))})
	}
	add("load_balancing_loss", r.LoadBalancingLoss)
	add("seq_load_balancing_loss", r.SeqLoadBalancingLoss)
	add("z_loss", r.ZLoss)
	return out
}

type moeMean struct {
	name  string
	value float64
}
