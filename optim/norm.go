package optim

import (
	"github.com/gotron/gotron/nn"
)

// NormOwners returns which of params a rank of tensor-parallel rank tpRank
// counts in the global gradient norm (Megatron's get_grad_norm_fp32 with
// param_is_not_tensor_parallel_duplicate): its partitions of
// tensor-parallel parameters, and, on tensor-parallel rank 0 only, the
// parameters every TP rank replicates. Parameters outside params (the
// second copy of a tied weight, say) count nowhere. Summing each rank's
// Adam.SumSquares over these and the squares over the model-parallel group
// (GlobalNorm) gives the whole model's norm on every rank.
func NormOwners(params []*nn.Parameter, tpRank int) func(*nn.Parameter) bool {
	owned := make(map[*nn.Parameter]bool, len(params))
	for _, p := range params {
		if p.TensorModelParallel || tpRank == 0 {
			owned[p] = true
		}
	}
	return func(p *nn.Parameter) bool { return owned[p] }
}
