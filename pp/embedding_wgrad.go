package pp

import "fmt"

// DeferEmbeddingWgrad returns the last rank's schedule s under
// defer_embedding_wgrad_compute (ModelParallelConfig): the backwards of
// the last chunk's last n microbatches, n = limit (wgrad_deferral_limit)
// or all M when limit is 0, compute everything but the output layer's
// weight gradients, and one EmbeddingWgrad action after the rank's last
// action runs those, in microbatch order — in the pipeline flush, where
// the last stage otherwise waits for the earlier stages' last backwards.
//
// The reference defers the first n microbatches and adds the others'
// weight gradients first; gotron defers the last n, the same work in the
// flush and the same bound on what is kept, so that the gradient sums its
// microbatches in order and equals 1F1B's bit for bit (docs/DECISIONS.md).
//
// Under grad_sync_func the chunk's GradSync moves after the deferred
// work, which runs inside no_sync; otherwise the EmbeddingWgrad runs
// outside it and the executor holds the hooks of all but the last
// microbatch's work, so that the output layer's gradient is reduced once,
// whole. s is not changed.
func DeferEmbeddingWgrad(s *Schedule, limit int) *Schedule {
	out := *s
	out.DeferredEmbeddingWgrads = s.Microbatches
	if limit > 0 {
		out.DeferredEmbeddingWgrads = min(limit, s.Microbatches)
	}
	c := max(s.VPP, 1) - 1
	out.Actions = nil
	synced := false
	for _, a := range s.Actions {
		if a.Kind == GradSync && a.Chunk == c {
			synced = true
			continue
		}
		out.Actions = append(out.Actions, a)
	}
	drain := Action{Kind: EmbeddingWgrad, Chunk: c}
	if synced {
		out.Actions = append(out.Actions, Action{Kind: DisableGradSync}, drain, Action{Kind: EnableGradSync}, Action{Kind: GradSync, Chunk: c})
	} else {
		out.Actions = append(out.Actions, drain)
	}
	return emitterOf(&out).done()
}

// DefersEmbedding reports whether the backward of microbatch m on chunk
// c leaves the output layer's weight gradients to the EmbeddingWgrad
// action.
func (s *Schedule) DefersEmbedding(m, c int) bool {
	return s.DeferredEmbeddingWgrads > 0 && c == max(s.VPP, 1)-1 && m >= s.Microbatches-s.DeferredEmbeddingWgrads
}

// checkDeferEmbedding refuses defer_embedding_wgrad_compute where it
// cannot run.
func (c Config) checkDeferEmbedding() error {
	switch {
	case !c.DeferEmbeddingWgrad:
		return nil
	case c.PP < 2:
		return fmt.Errorf("defer_embedding_wgrad_compute defers the output layer's weight gradients to the pipeline flush, but pipeline_model_parallel_size = %d has none: set %s ≥ 2, or turn --defer-embedding-wgrad-compute off", c.PP, flagPP)
	case c.WgradDeferralLimit < 0:
		return fmt.Errorf("wgrad_deferral_limit = %d: must be ≥ 0 (0 defers every microbatch)", c.WgradDeferralLimit)
	case ZeroBubble(c.Schedule):
		return fmt.Errorf("--pipeline-schedule %s already defers every weight gradient, the output layer's among them, into the bubble: turn --defer-embedding-wgrad-compute off, or choose %s", c.Schedule, ScheduleOneFOneB)
	}
	return nil
}
