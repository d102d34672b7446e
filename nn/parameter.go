package nn

import (
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/tensor"
)

// Parameter is a trainable tensor with Megatron's name and its parallel
// attributes.
type Parameter struct {
	*autograd.Var

	// TensorModelParallel says the tensor is split across the tensor-parallel
	// group along PartitionDim with PartitionStride (Megatron's
	// tensor_model_parallel, partition_dim, partition_stride).
	TensorModelParallel bool
	PartitionDim        int
	PartitionStride     int
	// SequenceParallel marks a parameter used in the sequence-parallel
	// region (layer norms) whose gradient finalize_model_grads all-reduces
	// over the tensor-parallel group.
	SequenceParallel bool
	// AverageGradientsAcrossTP marks a parameter every tensor-parallel rank
	// replicates whose gradient finalize_model_grads averages over the
	// tensor-parallel group (Megatron's average_gradients_across_tp_domain).
	AverageGradientsAcrossTP bool
	// SumGradientsAcrossTP marks a parameter every tensor-parallel rank
	// replicates but applies only to its own heads (q_layernorm and
	// k_layernorm): its gradient is partial over the tensor-parallel group
	// and finalize_model_grads sums it, with or without sequence
	// parallelism (the reference's qk_layernorm rule).
	SumGradientsAcrossTP bool
	// Shared marks a copy of a parameter another module owns: the word
	// embedding a pipeline chunk without the embedding holds as its output
	// layer (Megatron's shared embedding on the last stage, tied to the
	// first stage's). Its value and gradient are the owner's (the
	// embedding group's all-reduce keeps them so), so whatever counts or
	// stores each parameter once — the gradient norm, checkpoints, whole
	// tensors — skips it. The one rule for that, read by every caller.
	Shared bool
	// Allreduce says the gradient is reduced over the dense data-parallel
	// group (true, the default); expert parameters reduced over the
	// expert data-parallel group have it false (Megatron's param.allreduce).
	Allreduce bool
}

// NewParameter wraps value as a trainable parameter named name.
func NewParameter(name string, value *tensor.Tensor) *Parameter {
	v := autograd.NewLeaf(value, name, true)
	v.MarkParameter()
	return &Parameter{Var: v, PartitionDim: -1, PartitionStride: 1, Allreduce: true}
}

// Partitioned reports whether p is split over its tensor-parallel group
// along PartitionDim (Megatron's tensor_model_parallel with a
// partition_dim); a parameter that is not is whole on every rank of the
// group. Checkpoints, whole tensors and tensor-parallel gathers read this
// one rule.
func (p *Parameter) Partitioned() bool { return p.TensorModelParallel && p.PartitionDim >= 0 }

// Module is anything that owns parameters.
type Module interface {
	// Parameters returns the module's parameters in a fixed order.
	Parameters() []*Parameter
}
