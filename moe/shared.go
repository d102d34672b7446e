package moe

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor/kernels"
	"github.com/gotron/gotron/tp"
)

// SharedMLP is the shared experts (Megatron's SharedExpertMLP): a dense
// MLP every token passes through beside its routed experts, split over
// the attention's tensor-parallel group as the dense MLP is —
// mlp.shared_experts.linear_fc1 column-parallel [fs₁/tp, h] (gated: its
// gate and up rows), linear_fc2 row-parallel [h, fs/tp] — gathering and
// reduce-scattering the sequence under sequence parallelism.
type SharedMLP struct {
	FC1   *tp.ColumnParallelLinear
	FC2   *tp.RowParallelLinear
	Act   kernels.Activation
	Gated bool
}

// Forward returns the shared experts' output for x [s, b, h] ([s/tp, b, h]
// under sequence parallelism), shaped as x.
func (m *SharedMLP) Forward(t *autograd.Tape, x *autograd.Var) (*autograd.Var, error) {
	u, bias, err := m.FC1.Forward(t, x, nil, nil)
	if err != nil {
		return nil, err
	}
	u = nn.MLPActivation(t, u, bias, m.Act, m.Gated)
	y, _, err := m.FC2.Forward(t, u)
	return y, err
}

// Parameters returns linear_fc1's and linear_fc2's parameters.
func (m *SharedMLP) Parameters() []*nn.Parameter {
	return append(m.FC1.Parameters(), m.FC2.Parameters()...)
}
