package moe

import (
	"context"
	"fmt"
	"math"

	"github.com/gotron/gotron/comm"
)

// Metrics are one iteration's MoE metrics, as gotron train --log-json
// writes them ("moe"): per MoE
// layer, in global layer order, the auxiliary losses as Megatron's tracker
// logs them (each loss divided by its coefficient, averaged over the
// iteration's microbatches and the data-parallel replicas) and the tokens
// the router sent to each expert over the whole global batch (after
// dropping).
type Metrics struct {
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

// The losses' names in the metrics and the console line, as Megatron's
// tracker logs them.
const (
	LoadBalancingLossName    = "load_balancing_loss"
	SeqLoadBalancingLossName = "seq_load_balancing_loss"
	ZLossName                = "z_loss"
)

// LoggedLosses names the losses a MoE model logs, in Megatron's order:
// the load-balancing loss ("load_balancing_loss", or
// "seq_load_balancing_loss" for SeqAuxLoss) unless balance is NoBalance
// or its coefficient aux is 0 (lb ""), then the z loss unless its
// coefficient z is 0 (zLoss false).
func LoggedLosses(balance string, aux, z float64) (lb string, zLoss bool) {
	if aux > 0 && balance != NoBalance {
		lb = LoadBalancingLossName
		if balance == SeqAuxLoss {
			lb = SeqLoadBalancingLossName
		}
	}
	return lb, z > 0
}

// Tally is one rank's statistics of a model's MoE layers over an
// iteration, every MoE layer of the model in order: zero for the layers
// the rank does not hold.
type Tally struct {
	layers []int
	// lb and z are each layer's summed losses (Stats.LoadBalancing and
	// Z); tokens each layer's e counts, layer-major.
	lb, z  []float64
	tokens []int64
	e      int
}

// NewTally returns an empty tally of the MoE layers with the given
// global indices, each of experts experts.
func NewTally(layers []int, experts int) *Tally {
	return &Tally{layers: layers, lb: make([]float64, len(layers)), z: make([]float64, len(layers)),
		tokens: make([]int64, len(layers)*experts), e: experts}
}

// Add adds the statistics of the MoE layer with global index layer.
func (s *Tally) Add(layer int, st Stats) error {
	i := -1
	for j, l := range s.layers {
		if l == layer {
			i = j
		}
	}
	if i < 0 {
		return fmt.Errorf("moe: decoder layer %d holds a MoE layer, but the config's MoE layers are %v", layer, s.layers)
	}
	if len(st.Tokens) != 0 && len(st.Tokens) != s.e {
		return fmt.Errorf("moe: MoE layer %d counted tokens for %d experts, but the model has %d (num_moe_experts)", layer, len(st.Tokens), s.e)
	}
	s.lb[i] += st.LoadBalancing
	s.z[i] += st.Z
	for e, n := range st.Tokens {
		s.tokens[i*s.e+e] += int64(math.Round(float64(n)))
	}
	return nil
}

// Divisors say how a world's summed statistics become the logged
// metrics (NewDivisors).
type Divisors struct {
	LoadBalancing, Z float64
}

// NewDivisors returns the divisors of a layout as Megatron's tracker has
// them: the load-balancing losses sum the tp×cp partials of each
// replica's microbatches (÷ dp·microbatches), the z losses are each
// rank's own mean (÷ tp·cp·dp·microbatches).
func NewDivisors(dp, microbatches, tp, cp int) Divisors {
	d, m := float64(max(dp, 1)), float64(max(microbatches, 1))
	return Divisors{LoadBalancing: d * m, Z: float64(max(tp, 1)*max(cp, 1)) * d * m}
}

// Reduce sums every rank's tally over world (a collective: every rank
// calls it with a tally of the same layers) and returns the metrics on
// world rank 0 (nil elsewhere), with the losses LoggedLosses named. The
// losses are gathered as float64 and added in rank order (exact and the
// same on every run); the token counts are summed as integers.
func (s *Tally) Reduce(ctx context.Context, world comm.Group, div Divisors, lbName string, z bool) (*Metrics, error) {
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
	rec := &Metrics{Layers: append([]int(nil), s.layers...)}
	for i := range n {
		lb[i] /= div.LoadBalancing
		zl[i] /= div.Z
		rec.TokensPerExpert = append(rec.TokensPerExpert, tokens[i*s.e:(i+1)*s.e])
	}
	switch lbName {
	case LoadBalancingLossName:
		rec.LoadBalancingLoss = lb
	case SeqLoadBalancingLossName:
		rec.SeqLoadBalancingLoss = lb
	}
	if z {
		rec.ZLoss = zl
	}
	return rec, nil
}

// Means are the means over the layers of the metrics' losses, as
// Megatron's console line gives them: name and value, in order.
func (r *Metrics) Means() []Mean {
	var out []Mean
	add := func(name string, v []float64) {
		if len(v) == 0 {
			return
		}
		var s float64
		for _, x := range v {
			s += x
		}
		out = append(out, Mean{name, s / float64(len(v))})
	}
	add(LoadBalancingLossName, r.LoadBalancingLoss)
	add(SeqLoadBalancingLossName, r.SeqLoadBalancingLoss)
	add(ZLossName, r.ZLoss)
	return out
}

// Mean is one of Metrics.Means: a loss's name and its mean over the
// layers.
type Mean struct {
	Name  string
	Value float64
}
