package tp

import (
	"fmt"

	"github.com/gotron/gotron/nn"
)

// The tensor-parallel attributes of a parameter are three fields of
// nn.Parameter (Megatron's tensor_model_parallel, partition_dim and
// partition_stride attributes). Megatron tells "set" from "not set" by the
// attribute's presence; a Go struct always has its fields, so gotron reads
// the default values as "not set":
//
//	TensorModelParallel false, PartitionDim -1, PartitionStride 1
//	  (what nn.NewParameter gives; Megatron's defaults)
//
// A zero nn.Parameter (PartitionStride 0, built without NewParameter) is
// also "not set". Any other combination counts as set.

// tpAttributesSet reports whether p's tensor-parallel attributes differ
// from the defaults (see above).
func tpAttributesSet(p *nn.Parameter) bool {
	if p.TensorModelParallel {
		return true
	}
	if p.PartitionStride == 0 {
		return false // the zero Parameter
	}
	return p.PartitionDim != -1 || p.PartitionStride != 1
}

// SetTensorModelParallelAttributes marks p as split (isParallel) or not
// across the tensor-parallel group, along dim with stride
// (set_tensor_model_parallel_attributes). The attributes must not have
// been set before: p must hold the defaults (TensorModelParallel false,
// PartitionDim -1, PartitionStride 1, or the zero Parameter's values), else
// it returns an error naming the values p holds. stride must be at least 1
// and a split parameter needs dim ≥ 0.
func SetTensorModelParallelAttributes(p *nn.Parameter, isParallel bool, dim, stride int) error {
	if tpAttributesSet(p) {
		return fmt.Errorf("tp: set tensor model parallel attributes of %q: already set (tensor_model_parallel=%v, partition_dim=%d, partition_stride=%d); set them once, on a fresh parameter",
			p.Name, p.TensorModelParallel, p.PartitionDim, p.PartitionStride)
	}
	if stride < 1 {
		return fmt.Errorf("tp: set tensor model parallel attributes of %q: partition stride %d; want at least 1", p.Name, stride)
	}
	if isParallel && dim < 0 {
		return fmt.Errorf("tp: set tensor model parallel attributes of %q: a tensor-parallel parameter needs a partition dim ≥ 0, got %d", p.Name, dim)
	}
	p.TensorModelParallel, p.PartitionDim, p.PartitionStride = isParallel, dim, stride
	return nil
}

// SetDefaultsIfNotSetTensorModelParallelAttributes gives p the default
// attributes (TensorModelParallel false, PartitionDim -1, PartitionStride
// 1) unless they are already set
// (set_defaults_if_not_set_tensor_model_parallel_attributes). A parameter
// from nn.NewParameter already holds them; a zero Parameter gets them.
func SetDefaultsIfNotSetTensorModelParallelAttributes(p *nn.Parameter) {
	if !tpAttributesSet(p) {
		p.TensorModelParallel, p.PartitionDim, p.PartitionStride = false, -1, 1
	}
}

// CopyTensorModelParallelAttributes copies src's TensorModelParallel,
// PartitionDim and PartitionStride to dst
// (copy_tensor_model_parallel_attributes), e.g. onto the fp32 main copy
// of a parameter.
func CopyTensorModelParallelAttributes(dst, src *nn.Parameter) {
	dst.TensorModelParallel, dst.PartitionDim, dst.PartitionStride = src.TensorModelParallel, src.PartitionDim, src.PartitionStride
}

// ParamIsNotTensorParallelDuplicate reports whether p counts once across
// the tensor-parallel group (param_is_not_tensor_parallel_duplicate): a
// split parameter is unique on every rank; a replicated one counts only on
// the group's rank 0. tpRank is this rank's rank in the group p is
// replicated over: the tensor-parallel group, or for an expert parameter
// (Allreduce false) the expert tensor-parallel group. Gradient-norm and
// parameter-count reductions use it to skip duplicates.
func ParamIsNotTensorParallelDuplicate(p *nn.Parameter, tpRank int) bool {
	return p.TensorModelParallel || tpRank == 0
}
