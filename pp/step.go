package pp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/autograd"
)

// ForwardStepFunc is Megatron's forward_step_func: it runs the forward of
// one microbatch on one model chunk. The chunk's input tensor has already
// been set (SetInputTensor) from s.Input. It returns the chunk's output and,
// for a chunk that computes the loss, the function that reduces the output
// to it (loss_func); other chunks return a nil LossFunc.
type ForwardStepFunc func(ctx context.Context, s ForwardStep) (output *autograd.Var, loss LossFunc, err error)

// ForwardStep says which forward step to run.
type ForwardStep struct {
	Microbatch int // 0…M−1
	Chunk      int // the rank's model chunk, 0…V−1
	// Input is the activation received from the previous stage (nil on the
	// first stage's first chunk). It is a leaf whose gradient backward
	// fills and the schedule sends back.
	Input *autograd.Var
	// CheckpointActivations is set under
	// num_microbatches_with_partial_activation_checkpoints: whether this
	// microbatch recomputes its activations (nil: the model's setting).
	CheckpointActivations *bool
	// IsFirstMicrobatch is true for the chunk's first microbatch of the
	// iteration (or of a validation pass's first step, first_val_step).
	IsFirstMicrobatch bool
	// CollectNonLossData asks the returned LossFunc for what to store
	// instead of a loss (the reference's loss_func(output,
	// non_loss_data=True)): its Loss.Reported is stored and its Value is
	// not used.
	CollectNonLossData bool
}

// LossFunc reduces a last-stage output to the loss (Megatron's loss_func).
type LossFunc func(output *autograd.Var) (Loss, error)

// Loss is what a LossFunc returns: the reference's 3-tuple (loss,
// num_tokens, reduced) when NumTokens ≥ 0, or its legacy 2-tuple (loss,
// reduced) when NumTokens < 0.
type Loss struct {
	// Value is the scalar loss: with NumTokens ≥ 0 the sum over the
	// microbatch's tokens, which the schedule divides by max(NumTokens, 1)
	// and by M (unless calculate_per_token_loss, when it is left as a sum
	// and normalised by the global token count in finalize_model_grads);
	// with NumTokens < 0 a mean, which the schedule multiplies by the
	// context-parallel size and divides by M.
	Value *autograd.Var
	// NumTokens is the number of tokens the loss sums over, or −1 for the
	// 2-tuple form.
	NumTokens int64
	// GroupTokens, when > 0 with a context-parallel size cp > 1, is the
	// micro-batch's token count over the CP group (NumTokens being this
	// rank's part): the 3-tuple loss that is not per-token is then scaled
	// by cp/(M·GroupTokens) instead of 1/(M·NumTokens), so that after the
	// gradients' average over dp×cp each token weighs 1/(M·GroupTokens),
	// as on one rank. (The reference divides each CP rank's sum by its own
	// count: see docs/DECISIONS.md.)
	GroupTokens int64
	// Reported is what the loss function hands back for logging
	// (forward_data_store).
	Reported any
}

// scaleLoss applies forward_step_calc_loss's normalisation
// (docs/SEMANTICS.md § Schedules and loss scaling) to a last-stage loss:
//
//	3-tuple, not per-token:  loss · (1/M) / max(num_tokens, 1)
//	  with CP group tokens:  loss · cp / M / group_tokens
//	3-tuple, per-token:      loss (unscaled; finalize_model_grads scales)
//	2-tuple:                 loss · cp / M
//
// The 3-tuple factor is one float32 multiplication by (1/M)/max(n, 1),
// rounded as float32(1/M) then divided by n, so that with 0/1 loss masks
// the gradient reaching each token's loss is exactly that factor.
func scaleLoss(t *autograd.Tape, l Loss, m, cp int, perToken bool) (*autograd.Var, error) {
	if l.Value == nil || l.Value.Value.Len() != 1 {
		return nil, fmt.Errorf("pp: the loss function returned a loss that is not a scalar; return the microbatch's loss as one value")
	}
	switch {
	case l.NumTokens >= 0 && perToken:
		return l.Value, nil
	case l.NumTokens >= 0 && cp > 1 && l.GroupTokens > 0:
		return autograd.Scale(t, l.Value, float32(cp)/float32(m)/float32(l.GroupTokens)), nil
	case l.NumTokens >= 0:
		return autograd.Scale(t, l.Value, 1/float32(m)/float32(max(l.NumTokens, 1))), nil
	default:
		return autograd.Scale(t, l.Value, float32(cp)/float32(m)), nil
	}
}
