package moe

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
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
	// MLPOptions are the experts' activation (as the dense MLP's) and
	// weight-gradient accumulation.
	MLPOptions
	// GroupedGEMM runs the local experts as one grouped operation
	// (GroupedMLP, moe_grouped_gemm), else one MLP after another
	// (SequentialMLP).
	GroupedGEMM bool
	// ExpertBias enables the aux-loss-free balancing bias with UpdateRate.
	ExpertBias bool
	UpdateRate float64
}

// Dispatcher types (moe_token_dispatcher_type).
const (
	AllGatherDispatcher = "allgather"
	AllToAllDispatcher  = "alltoall"
)

// Parallel are the groups a MoE layer spans on the expert grid. The zero
// value is one rank holding every expert whole.
type Parallel struct {
	// EP is the expert-parallel group: its rank r holds the E/ep local
	// experts [r·E/ep, (r+1)·E/ep).
	EP comm.Group
	// ETP is the expert tensor-parallel group: every local expert's fc1 is
	// column-parallel over it ([f₁/etp, h], gated with its gate and up
	// rows) and its fc2 row-parallel ([h, f/etp]).
	ETP comm.Group
	// TPEP is the etp × ep group (tp-ep): the all-gather dispatcher's.
	TPEP comm.Group
	// TPCP is the attention's tp × cp group: its ranks hold the other
	// tokens of the same sequences (sequence and context parallel), so the
	// load-balancing loss counts tokens over it and the z loss averages
	// over it.
	TPCP comm.Group
	// Dispatcher is AllGatherDispatcher (the default) or AllToAllDispatcher.
	Dispatcher string
}

// GroupSize is g's size, 1 for nil.
func GroupSize(g comm.Group) int {
	if g == nil {
		return 1
	}
	return g.Size()
}

// GroupRank is g's rank, 0 for nil.
func GroupRank(g comm.Group) int {
	if g == nil {
		return 0
	}
	return g.Rank()
}

// Layer is one MoE layer on one rank: decoder.layers.{i}.mlp.router.weight
// [E, h] (whole on every rank), this rank's local experts
// mlp.experts.local_experts.{e}.linear_fc1.weight [f₁/etp, h] and
// linear_fc2.weight [h, f/etp] (f₁ = 2f gated; e the global index,
// FirstExpert + j for FC1[j]), and optionally the shared experts
// mlp.shared_experts.linear_fc1/fc2 (tensor-parallel like a dense MLP).
// With add_bias_linear the router has mlp.router.bias [E] (whole on every
// rank, as its weight) and each local expert linear_fc1.bias [f₁/etp]
// (split as its weight's rows) and linear_fc2.bias [h] (whole on every
// expert tensor-parallel rank; see MLPOptions.OmitFC2Bias).
type Layer struct {
	Config     LayerConfig
	Parallel   Parallel
	Router     *nn.Parameter
	RouterBias *nn.Parameter // nil: none
	FC1, FC2   []*nn.Parameter
	// FC1Bias and FC2Bias are the local experts' biases (nil: none).
	FC1Bias, FC2Bias []*nn.Parameter
	// FirstExpert is the global index of FC1[0]: EP rank · E/ep.
	FirstExpert int
	// Shared is the shared experts' MLP (nil: none).
	Shared *SharedMLP
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

// Forward runs the layer on x [s, b, h] (sequence-first, T = s·b tokens;
// under sequence parallelism this rank's s/tp positions):
//
//	logits = x·Wᵣᵀ;  probs, map = route(logits)
//	y[t] = Σ_e probs[t, e]·expert_e(x[t])  (+ shared(x[t]))
//
// with the load-balancing and z losses attached to the router's logits:
// their gradients, times auxScale (the main loss's backward scale,
// Megatron's MoEAuxLossAutoScaler), are added in backward. The losses,
// token counts and expert-bias counts are taken only while t records.
// Across ranks the routed rows travel as the layer's Parallel says.
func (l *Layer) Forward(t *autograd.Tape, x *autograd.Var, auxScale float32) (*autograd.Var, error) {
	shape := x.Value.Shape()
	if len(shape) != 3 {
		return nil, fmt.Errorf("moe: layer input %v is not [s, b, h]", shape)
	}
	s, b, h := shape[0], shape[1], shape[2]
	x2 := autograd.View(t, x, s*b, h)
	var rb *autograd.Var
	if l.RouterBias != nil {
		rb = l.RouterBias.Var
	}
	logits := nn.Linear(t, x2, l.Router.Var, rb) // [T, E]
	rf := &routerFn{l: l, s: s, b: b, scale: auxScale}
	probs := autograd.Apply(t, rf, logits)
	if err := t.Err(); err != nil {
		return nil, err
	}
	y, err := l.experts(t, x2, probs, rf.r.Map)
	if err != nil {
		return nil, err
	}
	if l.Shared != nil {
		u, err := l.Shared.Forward(t, x)
		if err != nil {
			return nil, err
		}
		y = autograd.Add(t, y, autograd.View(t, u, s*b, h))
	}
	return autograd.View(t, y, s, b, h), t.Err()
}

// experts returns Σ_e probs[t, e]·expert_e(x[t]) [T, h] for this rank's
// tokens x [T, h] routed by m [T, E]: on one rank, permute → grouped MLP →
// unpermute; with the all-gather dispatcher every rank of tp-ep gathers
// all tokens, runs its local experts (its expert-TP shards) on theirs and
// the partial outputs are reduce-scattered back; with the all-to-all
// dispatcher the permuted rows go to their experts' EP ranks, are
// all-gathered over expert TP, and come back the same way.
func (l *Layer) experts(t *autograd.Tape, x2, probs *autograd.Var, m []bool) (*autograd.Var, error) {
	ctx := t.Context()
	p := l.Parallel
	e := l.Config.Router.NumExperts
	tokens := x2.Value.Dim(0)
	w := l.expertVars()
	o := l.Config.MLPOptions
	o.OmitFC2Bias = GroupRank(p.ETP) != 0
	mlp := func(xs *autograd.Var, counts []int) *autograd.Var {
		if l.Config.GroupedGEMM {
			return GroupedMLP(t, xs, w, counts, o)
		}
		return SequentialMLP(t, xs, w, counts, o)
	}
	if GroupSize(p.EP)*GroupSize(p.ETP) > 1 && p.Dispatcher != AllToAllDispatcher {
		plan, err := NewAllGatherExchange(ctx, p.TPEP, m, tokens, e, l.FirstExpert, len(l.FC1))
		if err != nil {
			return nil, err
		}
		return plan.Combine(t, mlp(plan.Dispatch(t, x2), plan.Local()), probs), nil
	}
	d := NewDispatch(m, tokens, e)
	xp := Permute(t, x2, d)
	if GroupSize(p.EP)*GroupSize(p.ETP) == 1 {
		return Unpermute(t, mlp(xp, d.Counts), probs, d), nil
	}
	ep, err := NewEPExchange(ctx, p.EP, d.Counts)
	if err != nil {
		return nil, err
	}
	et, err := NewETPExchange(ctx, p.ETP, ep.Local)
	if err != nil {
		return nil, err
	}
	y := et.Combine(t, mlp(et.Dispatch(t, ep.Dispatch(t, xp)), et.Local))
	return Unpermute(t, ep.Combine(t, y), probs, d), nil
}

// expertVars are the local experts' parameters as Experts.
func (l *Layer) expertVars() Experts {
	vars := func(ps []*nn.Parameter) []*autograd.Var {
		if ps == nil {
			return nil
		}
		out := make([]*autograd.Var, len(ps))
		for j, p := range ps {
			out[j] = p.Var
		}
		return out
	}
	return Experts{W1: vars(l.FC1), W2: vars(l.FC2), B1: vars(l.FC1Bias), B2: vars(l.FC2Bias)}
}

// Parameters returns the layer's parameters in the reference's
// registration order: the router's weight and bias, each local expert's
// fc1 weight and bias and fc2 weight and bias, the shared experts'.
func (l *Layer) Parameters() []*nn.Parameter {
	ps := []*nn.Parameter{l.Router}
	if l.RouterBias != nil {
		ps = append(ps, l.RouterBias)
	}
	for e := range l.FC1 {
		ps = append(ps, l.FC1[e])
		if l.FC1Bias != nil {
			ps = append(ps, l.FC1Bias[e])
		}
		ps = append(ps, l.FC2[e])
		if l.FC2Bias != nil {
			ps = append(ps, l.FC2Bias[e])
		}
	}
	if l.Shared != nil {
		ps = append(ps, l.Shared.Parameters()...)
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
		aux, err := f.losses(c.Tape().Context(), ld, t, e)
		if err != nil {
			return nil, err
		}
		c.State = routerState{r: r, aux: aux}
	}
	return tensor.FromSlice(r.Probs, t, e), nil
}

// losses computes the load-balancing and z losses of the pass, records
// them and returns their gradient with respect to the logits (nil: no
// such loss). Over a tp × cp
// group of n ranks (Parallel.TPCP), each holding other tokens of the same
// sequences, the tokens per expert are summed over the group and the
// token count is n·T, so that the ranks' losses add up to the loss of the
// whole sequences (Megatron's get_tokens_per_expert_and_token_count over
// tp_cp); the z loss's coefficient is divided by n (each rank's is the
// mean over its own tokens).
func (f *routerFn) losses(ctx context.Context, logits []float32, t, e int) ([]float32, error) {
	cfg := f.l.Config
	st := &f.l.Stats
	g := f.l.Parallel.TPCP
	n := GroupSize(g)
	var grad []float32
	add := func(d []float32) {
		if grad == nil {
			grad = make([]float32, len(d))
		}
		for i, v := range d {
			grad[i] += v
		}
	}
	overGroup := func(tokens []float32) error {
		if n == 1 {
			return nil
		}
		if err := g.AllReduce(ctx, comm.F32(tokens), comm.Sum); err != nil {
			return fmt.Errorf("moe: summing the tokens per expert over %s: %w", g.Name(), err)
		}
		return nil
	}
	if cfg.AuxCoeff > 0 && cfg.Balance != NoBalance {
		a, err := NewAuxScores(logits, t, e, cfg.Router.TopK, cfg.Router.ScoreFunction)
		if err != nil {
			return nil, err
		}
		var loss float64
		var ds []float32
		if cfg.Balance == SeqAuxLoss {
			tokens := TokensPerExpert(a.Map, f.b*e)
			if err := overGroup(tokens); err != nil {
				return nil, err
			}
			if loss, ds, err = a.SeqLoadBalancingLoss(f.s, f.b, tokens, n*f.s, cfg.AuxCoeff); err != nil {
				return nil, err
			}
		} else {
			tokens := TokensPerExpert(a.Map, e)
			if err := overGroup(tokens); err != nil {
				return nil, err
			}
			loss, ds = LoadBalancingLoss(a.Scores, tokens, n*t, e, cfg.Router.TopK, cfg.AuxCoeff)
		}
		st.LoadBalancing += loss / cfg.AuxCoeff
		add(a.Backward(ds))
	}
	if cfg.ZCoeff > 0 {
		coeff := cfg.ZCoeff / float64(n)
		loss, d := ZLoss(logits, t, e, coeff)
		st.Z += loss / coeff
		add(d)
	}
	return grad, nil
}

func (f *routerFn) Backward(c *autograd.Ctx, dProbs *tensor.Tensor) ([]*tensor.Tensor, error) {
	st := c.State.(routerState)
	d := st.r.Backward(dProbs.Contiguous().Data())
	for i, v := range st.aux {
		d[i] += f.scale * v
	}
	return []*tensor.Tensor{tensor.FromSlice(d, st.r.T, st.r.E)}, nil
}

// routerState is what the router keeps for backward: the routing (its
// map, chosen experts and scores; the probabilities are the output's
// storage, counted where they are saved) and the auxiliary losses'
// gradient.
type routerState struct {
	r   *Routing
	aux []float32 // d(aux + z)/dlogits, unscaled (nil: none)
}

// StateBytes is the routing's map (a byte per token and expert), scores
// (float32 [T, E]) and chosen experts (int [T, k]) and the auxiliary
// gradient (float32 [T, E], with a load-balancing or z loss).
func (s routerState) StateBytes() int64 {
	r := s.r
	return int64(len(r.Map)) + 4*int64(len(r.scores)) + 8*int64(len(r.Indices)) + 4*int64(len(s.aux))
}
