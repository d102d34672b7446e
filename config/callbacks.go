package config

import "context"

// The callback types below are the hooks through which the pipeline schedules
// reach data parallelism, the optimizer and the timers without importing
// them, as in Megatron-Core where they are Callable fields of
// ModelParallelConfig. A nil callback means "not used", like the reference's
// None. The training layer fills them in (for instance from the DDP-wrapped
// model chunks); a closure captures whatever state it needs (model chunks,
// groups), so no callback takes the model as an argument.

// Timer is one named timer of a Timers collection. With barrier set, the
// timer first waits for all ranks of the world (the reference's
// barrier_with_L1_time); implementations decide what a failed barrier does.
type Timer interface {
	Start(barrier bool)
	Stop(barrier bool)
}

// TimersFunc returns the timer called name, creating it at logLevel if new
// (Megatron's Timers.__call__(name, log_level)). Levels are Megatron's: 0 is
// the coarsest (always logged), 2 the finest. Callers pass -1 where the
// reference passes no level, meaning "the level the timer already has".
type TimersFunc func(name string, logLevel int) Timer

// FinalizeModelGradsFunc finishes the gradient work of an iteration after its
// last backward step: the data-parallel reduction (all-reduce or
// reduce-scatter), the tensor-parallel all-reduce of sequence-parallel and
// layernorm gradients, the embedding all-reduce between the first and last
// pipeline stages, and, when numTokens is non-nil, the scaling of all
// gradients by 1/max(*numTokens, 1) (per-token loss; docs/SEMANTICS.md
// § finalize_model_grads, step 10). forceAllReduce makes a
// distributed-optimizer buffer all-reduce instead of reduce-scatter.
//
// The schedules pass numTokens only when calculate_per_token_loss is set; it
// is the local token count of this rank summed over its microbatches.
type FinalizeModelGradsFunc func(ctx context.Context, numTokens *int64, forceAllReduce bool) error

// LossScaleFunc returns the current loss scale s (1 when no scaling). The
// schedules multiply the loss by s before backward, which is what the
// reference's grad_scale_func(loss) = s·loss does.
type LossScaleFunc func() float32

// NoSyncFunc suspends the asynchronous data-parallel gradient reduction of
// every model chunk (the reference's no_sync context manager, entered for all
// chunks at once) and returns the function that resumes it. The schedules run
// all microbatches but the last under it.
type NoSyncFunc func() (resume func())

// ChunkSyncFunc launches an asynchronous synchronisation for model chunk
// chunk (0-based virtual-pipeline chunk index on this rank): a gradient
// reduction for grad_sync_func, a parameter all-gather for param_sync_func.
// It returns once the operation is launched, not finished.
type ChunkSyncFunc func(ctx context.Context, chunk int) error

// ScopeFunc enters a scope and returns the function that leaves it (a Python
// context manager in Go form).
type ScopeFunc func() (exit func())
