package moe

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Load-balancing types (moe_router_load_balancing_type).
const (
	AuxLoss    = "aux_loss"
	SeqAuxLoss = "seq_aux_loss"
	NoBalance  = "none"
)

// LayerConfig is what a MoE layer computes.
type LayerConfig struct {
	Router RouterOptions
	// Drop, when set, applies expert capacity (moe_expert_capacity_factor).
	Drop *DropOptions
	// Balance is the load-balancing loss: AuxLoss, SeqAuxLoss or NoBalance;
	// AuxCoeff its weight, ZCoeff the z loss's (0: none).
	Balance          string
	AuxCoeff, ZCoeff float64
	// Act and Gated are the experts' activation (as the dense MLP's).
	Act   kernels.Activation
	Gated bool
	// ExpertBias enables the aux-loss-free balancing bias with UpdateRate.
	ExpertBias bool
	UpdateRate float64
}

// Layer is one MoE layer on one rank holding every expert:
// decoder.layers.{i}.mlp.router.weight [E, h],
// mlp.experts.local_experts.{e}.linear_fc1.weight [f₁, h] and linear_fc2.weight
// [h, f] (f₁ = 2f gated), and optionally mlp.shared_experts.linear_fc1/fc2.
type Layer struct {
	Config   LayerConfig
	Router   *nn.Parameter
	FC1, FC2 []*nn.Parameter
	// SharedFC1 and SharedFC2 are the shared experts' MLP (nil: none).
	SharedFC1, SharedFC2 *nn.Parameter
	// Bias [E] is the expert bias (a buffer, not a parameter), and Counts
	// [E] the tokens routed to each expert by the training forwards since
	// the last UpdateBias (Megatron's local_tokens_per_expert).
	Bias, Counts []float32
	// Stats accumulate what the layer logs.
	Stats Stats
}

// Stats are a layer's logged quantities, summed over the training
// forwards since the last Reset: the load-balancing (or sequence-level)
// and z losses as Megatron's tracker records them (the loss divided by its
// coefficient), the number of forwards, and the tokens each expert
// processed (after dropping). Megatron logs the losses' mean over the
// forwards of an iteration.
type Stats struct {
	LoadBalancing, Z float64
	Passes           int
	Tokens           []float32
}

// Reset clears the statistics (at the start of an iteration).
func (s *Stats) Reset() { *s = Stats{} }

// Forward runs the layer on x [s, b, h] (sequence-first, T = s·b tokens):
//
//	logits = x·Wᵣᵀ;  probs, map = route(logits)
//	y[t] = Σ_e probs[t, e]·expert_e(x[t])  (+ shared(x[t]))
//
// with the load-balancing and z losses attached to the router's logits:
// their gradients, times auxScale (the main loss's backward scale,
// Megatron's MoEAuxLossAutoScaler), are added in backward. The losses,
// token counts and expert-bias counts are taken only while t records.
func (l *Layer) Forward(t *autograd.Tape, x *autograd.Var, auxScale float32) (*autograd.Var, error) {
	shape := x.Value.Shape()
	if len(shape) != 3 {
		return nil, fmt.Errorf("moe: layer input %v is not [s, b, h]", shape)
	}
	s, b, h := shape[0], shape[1], shape[2]
	x2 := autograd.View(t, x, s*b, h)
	logits := nn.Linear(t, x2, l.Router.Var, nil) // [T, E]
	rf := &routerFn{l: l, s: s, b: b, scale: auxScale}
	probs := autograd.Apply(t, rf, logits)
	if err := t.Err(); err != nil {
		return nil, err
	}
	d := NewDispatch(rf.r.Map, s*b, l.Config.Router.NumExperts)
	xp := Permute(t, x2, d)
	w1, w2 := make([]*autograd.Var, len(l.FC1)), make([]*autograd.Var, len(l.FC2))
	for e := range l.FC1 {
		w1[e], w2[e] = l.FC1[e].Var, l.FC2[e].Var
	}
	yp := GroupedMLP(t, xp, w1, w2, d.Counts, l.Config.Act, l.Config.Gated)
	y := Unpermute(t, yp, probs, d)
	if l.SharedFC1 != nil {
		u := nn.Linear(t, x2, l.SharedFC1.Var, nil)
		u = nn.MLPActivation(t, u, nil, l.Config.Act, l.Config.Gated)
		y = autograd.Add(t, y, nn.Linear(t, u, l.SharedFC2.Var, nil))
	}
	return autograd.View(t, y, s, b, h), t.Err()
}

// Parameters returns the layer's parameters: the router, each expert's
// fc1 and fc2, the shared experts'.
func (l *Layer) Parameters() []*nn.Parameter {
	ps := []*nn.Parameter{l.Router}
	for e := range l.FC1 {
		ps = append(ps, l.FC1[e], l.FC2[e])
	}
	if l.SharedFC1 != nil {
		ps = append(ps, l.SharedFC1, l.SharedFC2)
	}
	return ps
}

// UpdateBias applies the expert-bias step to the layer's bias with the
// token counts summed over the ranks (tokens, normally Counts after an
// all-reduce) and zeroes Counts (finalize_model_grads).
func (l *Layer) UpdateBias(tokens []float32) {
	if l.Bias == nil {
		return
	}
	UpdateExpertBias(l.Bias, tokens, l.Config.UpdateRate)
	clear(l.Counts)
}

// routerFn turns the router's logits [T, E] into the routing
// probabilities [T, E] (zero off the map); backward adds the scaled
// load-balancing and z losses' gradients.
type routerFn struct {
	l     *Layer
	s, b  int
	scale float32
	r     *Routing
	aux   []float32 // d(aux + z)/dlogits, unscaled (nil: none)
}

func (f *routerFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	cfg := f.l.Config
	logits := in[0].Contiguous()
	t, e := logits.Dim(0), logits.Dim(1)
	o := cfg.Router
	if cfg.ExpertBias {
		o.ExpertBias = f.l.Bias
	}
	ld := logits.Data()
	r, err := Route(ld, t, o)
	if err != nil {
		return nil, err
	}
	if cfg.Drop != nil {
		if _, err := r.Drop(*cfg.Drop); err != nil {
			return nil, err
		}
	}
	f.r = r
	if c.Recording() {
		st := &f.l.Stats
		if st.Tokens == nil {
			st.Tokens = make([]float32, e)
		}
		counts := TokensPerExpert(r.Map, e)
		for j, n := range counts {
			st.Tokens[j] += n
			if cfg.ExpertBias {
				f.l.Counts[j] += n
			}
		}
		st.Passes++
		if err := f.losses(ld, t, e); err != nil {
			return nil, err
		}
	}
	return tensor.FromSlice(r.Probs, t, e), nil
}

// losses computes the load-balancing and z losses of the pass, records
// them and keeps their gradient with respect to the logits.
func (f *routerFn) losses(logits []float32, t, e int) error {
	cfg := f.l.Config
	st := &f.l.Stats
	var grad []float32
	add := func(d []float32) {
		if grad == nil {
			grad = make([]float32, len(d))
		}
		for i, v := range d {
			grad[i] += v
		}
	}
	if cfg.AuxCoeff > 0 && cfg.Balance != NoBalance {
		a, err := NewAuxScores(logits, t, e, cfg.Router.TopK, cfg.Router.ScoreFunction)
		if err != nil {
			return err
		}
		var loss float64
		var ds []float32
		if cfg.Balance == SeqAuxLoss {
			if loss, ds, err = a.SeqLoadBalancingLoss(f.s, f.b, cfg.AuxCoeff); err != nil {
				return err
			}
		} else {
			loss, ds = LoadBalancingLoss(a.Scores, TokensPerExpert(a.Map, e), t, e, cfg.Router.TopK, cfg.AuxCoeff)
		}
		st.LoadBalancing += loss / cfg.AuxCoeff
		add(a.Backward(ds))
	}
	if cfg.ZCoeff > 0 {
		loss, d := ZLoss(logits, t, e, cfg.ZCoeff)
		st.Z += loss / cfg.ZCoeff
		add(d)
	}
	f.aux = grad
	return nil
}

func (f *routerFn) Backward(c *autograd.Ctx, dProbs *tensor.Tensor) ([]*tensor.Tensor, error) {
	d := f.r.Backward(dProbs.Contiguous().Data())
	for i, v := range f.aux {
		d[i] += f.scale * v
	}
	return []*tensor.Tensor{tensor.FromSlice(d, f.r.T, f.r.E)}, nil
}
