package optim

import (
	"github.com/gotron/gotron/nn"
)

// NormOwners returns which of params a rank of tensor-parallel rank tpRank
// and expert tensor-parallel rank etpRank counts in the global gradient
// norm (Megatron's get_grad_norm_fp32 with
// param_is_not_tensor_parallel_duplicate): its partitions of
// tensor-parallel parameters, and, on tensor-parallel rank 0 only, the
// parameters every TP rank replicates; for an expert's parameters (not
// all-reduced) the same over the expert tensor-parallel group. Parameters
// outside params (the second copy of a tied weight, say) count nowhere.
// Summing each rank's Adam.SumSquares over these and the squares over the
// model-parallel group (GlobalNorm; the experts' over the expert
// model-parallel group) gives the whole model's norm on every rank.
func NormOwners(params []*nn.Parameter, tpRank, etpRank int) func(*nn.Parameter) bool {
	owned := make(map[*nn.Parameter]bool, len(params))
	for _, p := range params {
		r := tpRank
		if !p.Allreduce {
			r = etpRank
		}
		if p.TensorModelParallel || r == 0 {
			owned[p] = true
		}
	}
	return func(p *nn.Parameter) bool { return owned[p] }
}
