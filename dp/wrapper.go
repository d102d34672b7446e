package dp

import (
	"context"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// Wrapper is a data-parallel owner of a model chunk's parameter and
// gradient storage, as the trainer, the schedules (through the config's
// callbacks), finalize_model_grads and the optimizer use it: DDP (plain
// DDP and the distributed optimizer) and FSDP (Megatron-FSDP's
// gradient- and parameter-sharding strategies). A trainer holds Wrappers
// and never asks which one it has.
type Wrapper interface {
	// Config returns the DDP config the wrapper was built with.
	Config() config.DDPConfig
	// Parameters returns the wrapped parameters in registration order.
	Parameters() []*nn.Parameter
	// NumBuckets returns the number of gradient buckets (FSDP: units).
	NumBuckets() int

	// ZeroGradBuffer zeroes every gradient before an iteration.
	ZeroGradBuffer()
	// NoSync suspends the reduction of the micro-batches run before the
	// returned function (no_sync); FSDP's sharded gradients reduce every
	// micro-batch and ignore it.
	NoSync() (resume func())
	// StartGradSync launches the reductions not yet started (the
	// schedules' grad_sync_func).
	StartGradSync(ctx context.Context) error
	// FinishGradSync finishes every reduction (finish_grad_sync).
	FinishGradSync(ctx context.Context, forceAllReduce bool) error
	// ScaleGradients multiplies every gradient this rank keeps by s.
	ScaleGradients(s float32)
	// GradOf returns the gradient of p this rank keeps once reduced, for
	// finalize_model_grads' reductions over other groups: p.Grad (DDP),
	// or the float32 elements of p in this rank's shards as one 1-d
	// tensor (FSDP; nil when they hold none). Every rank holding the same
	// shard of the same layout gets the same shapes.
	GradOf(p *nn.Parameter) *tensor.Tensor

	// StartParamSync brings the updated parameters to where the next
	// forward pass reads them, after the optimizer step
	// (start_param_sync); forceSync finishes everything in flight, so
	// that every rank can read whole parameters (a checkpoint).
	StartParamSync(ctx context.Context, forceSync bool) error
	// ParamsUpdated runs after the distributed optimizer updated this
	// rank's shards: the wrapper starts bringing them to the parameters
	// (DDP: the all-gather, unless overlap_param_gather leaves it to the
	// next forward pass).
	ParamsUpdated(ctx context.Context) error
	// ParamPreHook runs before a part of a forward pass uses ps.
	ParamPreHook(ctx context.Context, ps []*nn.Parameter) error
	// ParamPostHook runs after that part produced y from ps and returns
	// what the pass goes on with: y, or y behind an autograd function
	// whose backward prepares ps for the part's backward.
	ParamPostHook(ctx context.Context, t *autograd.Tape, ps []*nn.Parameter, y *autograd.Var) *autograd.Var

	// SetParam sets p's whole value to v (a checkpoint's, float32, of p's
	// shape): in p's Value and wherever the wrapper keeps its elements.
	SetParam(p *nn.Parameter, v *tensor.Tensor)
	// BroadcastParams copies every parameter from the group's rank 0 (an
	// FSDP that releases its units keeps only shards and refuses:
	// broadcast before wrapping).
	BroadcastParams(ctx context.Context) error
	// AllGatherGrads makes every parameter's Grad whole on every rank
	// (for inspection: gradient dumps, tests).
	AllGatherGrads(ctx context.Context) error
	// StateBytes returns the bytes of parameters and gradients the
	// wrapper holds at most (buffers, shards, and what is gathered or
	// whole during a pass).
	StateBytes() (params, grads int64)
	// OptimizerShards returns the pieces of the parameters this rank's
	// distributed optimizer updates.
	OptimizerShards() ([]ShardPiece, error)
}

// ShardPiece is a run of one parameter's elements that this rank's
// distributed optimizer updates: elements [Offset, Offset+Len) of the
// flattened parameter.
type ShardPiece struct {
	Param       *nn.Parameter
	Offset, Len int
	// Model and Grad, when set, hold the piece's parameter elements (in
	// the parameters' type) and its float32 gradient apart from Param's
	// Value and Grad, which an FSDP keeps whole only while a pass uses
	// them. The zero Buffers: the piece lives in Param's Value and Grad.
	Model, Grad comm.Buffer
}

var (
	_ Wrapper = (*DDP)(nil)
	_ Wrapper = (*FSDP)(nil)
)
