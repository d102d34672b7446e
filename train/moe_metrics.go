package train

import (
	"context"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/moe"
)

// moeLayerIndices are the global indices of the model's MoE layers (by
// the config alone: every rank knows them, whatever layers it holds); an
// MTP depth k's layer, a MoE layer when the decoder's last one is, is
// num_layers + k, as the reference numbers it in its metrics.
func moeLayerIndices(m config.TransformerConfig) []int {
	var out []int
	for i := range m.NumLayers {
		if m.IsMoELayer(i) {
			out = append(out, i)
		}
	}
	if m.NumLayers > 0 && m.IsMoELayer(m.NumLayers-1) {
		for k := range m.MTPNumLayers {
			out = append(out, m.NumLayers+k)
		}
	}
	return out
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
func (t *trainer) moeMetrics(ctx context.Context) (*moe.Metrics, error) {
	m := t.a.Model
	if m.NumMoEExperts <= 0 {
		return nil, nil
	}
	layers := moeLayerIndices(m)
	if len(layers) == 0 {
		return nil, nil
	}
	s := moe.NewTally(layers, m.NumMoEExperts)
	for _, c := range t.chunks {
		for _, l := range c.AllLayers() {
			if l.MoE == nil {
				continue
			}
			if err := s.Add(l.Number, l.MoE.Stats); err != nil {
				return nil, err
			}
			l.MoE.Stats.Reset()
		}
	}
	lb, z := moe.LoggedLosses(m.MoERouterLoadBalancingType, m.MoEAuxLossCoeff, m.MoEZLossCoeff)
	return s.Reduce(ctx, t.groups.World, moe.NewDivisors(t.dp, t.micro, t.tp.Size(), m.ContextParallelSize), lb, z)
}
