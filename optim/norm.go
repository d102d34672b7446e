package optim

import (
	"context"
	"fmt"
	"math"

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
	s := SumSquares(owned)
	if mp == nil || mp.Size() == 1 {
		return math.Sqrt(s), nil
	}
	// The partial sums travel as float32 pairs (hi, lo) so that the float64
	// sum keeps its precision through a float32 collective.
	hi := float32(s)
	buf := make([]float32, 2*mp.Size())
	mine := []float32{hi, float32(s - float64(hi))}
	if err := mp.AllGather(ctx, comm.F32(buf), comm.F32(mine)); err != nil {
		return 0, fmt.Errorf("optim: gradient norm all-gather over %s: %w", mp.Name(), err)
	}
	var total float64
	for r := 0; r < mp.Size(); r++ {
		total += float64(buf[2*r]) + float64(buf[2*r+1])
	}
	return math.Sqrt(total), nil
}
