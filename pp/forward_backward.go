package pp

import (
	"context"
	"fmt"
)

// ForwardBackwardFunc runs the forward and backward passes of all
// microbatches of one iteration on this rank's model chunks (or the forward
// passes only, for evaluation), then finishes the iteration's gradients
// through the config's callbacks: the reference's
// forward_backward_no_pipelining, _pipelining_without_interleaving and
// _pipelining_with_interleaving.
type ForwardBackwardFunc func(ctx context.Context, a Args) (*Result, error)

// GetForwardBackwardFunc returns the schedule for pp ranks with vpp model
// chunks each (get_forward_backward_func): interleaved 1F1B when pp > 1 and
// vpp is set (> 0), 1F1B when pp > 1, and no pipelining otherwise.
func GetForwardBackwardFunc(pp, vpp int) ForwardBackwardFunc {
	switch {
	case pp > 1 && vpp > 0:
		return ForwardBackwardPipeliningWithInterleaving
	case pp > 1:
		return ForwardBackwardPipeliningWithoutInterleaving
	}
	return ForwardBackwardNoPipelining
}

// ForwardBackwardNoPipelining runs all microbatches on one model chunk,
// every one but the last under no_sync.
func ForwardBackwardNoPipelining(ctx context.Context, a Args) (*Result, error) {
	if len(a.Chunks) != 1 {
		return nil, fmt.Errorf("pp: forward_backward_no_pipelining takes one model chunk, got %d", len(a.Chunks))
	}
	if a.NumMicrobatches < 1 {
		return nil, fmt.Errorf("pp: %d microbatches: need at least 1", a.NumMicrobatches)
	}
	return run(ctx, a, NoPipelining(a.NumMicrobatches, a.ForwardOnly))
}

// ForwardBackwardPipeliningWithoutInterleaving runs the 1F1B schedule:
// warmup forwards, steady one-forward-one-backward, cooldown backwards.
func ForwardBackwardPipeliningWithoutInterleaving(ctx context.Context, a Args) (*Result, error) {
	return buildAndRun(ctx, a, 0)
}

// ForwardBackwardPipeliningWithInterleaving runs the interleaved 1F1B
// schedule over the rank's virtual-pipeline model chunks.
func ForwardBackwardPipeliningWithInterleaving(ctx context.Context, a Args) (*Result, error) {
	return buildAndRun(ctx, a, len(a.Chunks))
}

// buildAndRun builds this rank's schedule from the config and runs it.
func buildAndRun(ctx context.Context, a Args, vpp int) (*Result, error) {
	mp := a.Config.ModelParallelConfig
	s, err := Build(Config{
		PP: mp.PipelineModelParallelSize, Rank: a.Rank, VPP: vpp,
		Microbatches: a.NumMicrobatches, GroupSize: mp.MicrobatchGroupSizePerVPStage,
		ForwardOnly: a.ForwardOnly, OverlapP2PComm: mp.OverlapP2PComm,
		OverlapP2PCommWarmupFlush: mp.OverlapP2PCommWarmupFlush, BatchP2PComm: mp.BatchP2PComm,
		DeallocatePipelineOutputs: mp.DeallocatePipelineOutputs,
		GradSyncFunc:              mp.GradSyncFunc != nil, ParamSyncFunc: mp.ParamSyncFunc != nil,
		Schedule: a.Schedule, DeferEmbeddingWgrad: mp.DeferEmbeddingWgradCompute, WgradDeferralLimit: mp.WgradDeferralLimit,
	})
	if err != nil {
		return nil, err
	}
	return run(ctx, a, s)
}
