package optim

import (
	"context"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
)

// GradNorm returns the global L2 norm of the gradients of a model split
// over the model-parallel group mp (Megatron's get_grad_norm_fp32): each
// rank sums the squares of the gradients it owns (SumSquares) — its
// partitions of tensor-parallel parameters, and, on tensor-parallel rank 0
// only, the parameters every TP rank replicates
// (param_is_not_tensor_parallel_duplicate) — the sums are all-reduced over
// mp, and the result is the square root. A single rank passes mp nil and
// tpRank 0. Every member of mp gets the same norm, so clipping scales all
// ranks alike.
func GradNorm(ctx context.Context, params []*nn.Parameter, mp comm.Group, tpRank int) (float64, error) {
	owned := make([]*nn.Parameter, 0, len(params))
	for _, p := range params {
		if p.TensorModelParallel || tpRank == 0 {
			owned = append(owned, p)
		}
	}
	return GlobalNorm(ctx, SumSquares(owned), mp)
}
