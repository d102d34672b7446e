package pp

import "fmt"

// Kind says what an Action does.
type Kind uint8

// The action kinds. A schedule is, for each pipeline rank, an ordered list
// of actions; the executor walks it: a schedule is data, built and
// verified (Verify) before anything runs.
const (
	// Forward runs the forward step of (Microbatch, Chunk).
	Forward Kind = iota
	// Backward runs the backward step of (Microbatch, Chunk).
	Backward
	// Comm is one call of the P2P communicator: the Ops are issued together
	// (the reference's _communicate with its tensor_send_next,
	// tensor_send_prev, recv_prev and recv_next). Without Async the call
	// returns once every op is done; with Async (overlap_p2p_comm) it returns
	// handles that later Wait actions wait for.
	Comm
	// Wait waits for the async op Op issued by an earlier Comm action.
	Wait
	// DisableGradSync enters no_sync for every model chunk: gradients only
	// accumulate.
	DisableGradSync
	// EnableGradSync leaves no_sync: the next backward passes launch the
	// data-parallel reduction (the last microbatch's hooks).
	EnableGradSync
	// GradSync calls grad_sync_func for Chunk (launches its reduction).
	GradSync
	// ParamSync calls param_sync_func for Chunk (launches its all-gather).
	ParamSync
	// WeightGrad runs the parameter-gradient half ("W") of the backward of
	// (Microbatch, Chunk), in a schedule whose backward is split
	// (Schedule.SplitBackward): its Backward computed the input gradient
	// only (autograd.BackwardSplit).
	WeightGrad
	// EmbeddingWgrad runs, on the last stage under
	// defer_embedding_wgrad_compute, the output layer's weight-gradient
	// GEMMs that the backwards of Chunk's last microbatches deferred
	// (Schedule.DeferredEmbeddingWgrads), in microbatch order: the
	// reference's drain_embedding_wgrad_compute, in the pipeline flush.
	EmbeddingWgrad
)

var kindNames = [...]string{"F", "B", "comm", "wait", "no_sync", "sync", "grad_sync", "param_sync", "W", "emb_wgrad"}

// computes reports whether actions of the kind run the model: a forward,
// a backward or (part of) its weight gradients.
func (k Kind) computes() bool {
	return k == Forward || k == Backward || k == WeightGrad || k == EmbeddingWgrad
}

// String returns a short name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Dir is the direction and payload of one point-to-point op, seen from the
// rank that issues it.
type Dir uint8

// The four ops of a P2P exchange, in the reference's batch order.
const (
	// SendPrev sends the input gradient of (Microbatch, Chunk) to the
	// previous stage.
	SendPrev Dir = iota
	// RecvPrev receives the input activation of (Microbatch, Chunk) from
	// the previous stage.
	RecvPrev
	// SendNext sends the output activation of (Microbatch, Chunk) to the
	// next stage.
	SendNext
	// RecvNext receives the output gradient of (Microbatch, Chunk) from the
	// next stage.
	RecvNext
)

var dirNames = [...]string{"send_prev", "recv_prev", "send_next", "recv_next"}

// String returns the reference's handle name ("send_next", "recv_prev", …).
func (d Dir) String() string {
	if int(d) < len(dirNames) {
		return dirNames[d]
	}
	return fmt.Sprintf("Dir(%d)", int(d))
}

// Op is one point-to-point op of a Comm action. Microbatch and Chunk name
// the tensor on the issuing rank: a send to the next stage carries the
// output of (Microbatch, Chunk) and is received by the next stage as the
// input of (Microbatch, Chunk') where Chunk' = Chunk on ranks 1…P−1 and
// Chunk+1 when the sender is the last rank (the interleaved wrap-around);
// gradients travel the other way.
type Op struct {
	Dir        Dir
	Microbatch int
	Chunk      int
}

// String formats the op as "recv_prev(m3,c1)".
func (o Op) String() string { return fmt.Sprintf("%v(m%d,c%d)", o.Dir, o.Microbatch, o.Chunk) }

// Action is one step of a rank's schedule.
type Action struct {
	Kind Kind
	// Microbatch and Chunk name the work of Forward and Backward (Chunk is
	// the rank's local model chunk, 0…V−1), and the chunk of GradSync and
	// ParamSync.
	Microbatch int
	Chunk      int
	// Ops are a Comm action's point-to-point ops, in the order the
	// reference issues them.
	Ops []Op
	// Async marks a Comm action whose ops are waited for by later Wait
	// actions (overlap_p2p_comm).
	Async bool
	// Call is the P2PCommunicator method a Comm action stands for
	// ("send_forward_recv_backward", …), for display.
	Call string
	// Op is the op a Wait action waits for.
	Op Op
}

// String formats the action compactly: "F(m0,c1)", "B(m2,c0)",
// "send_forward_recv_backward[send_next(m0,c0) recv_next(m0,c0)]",
// "wait(recv_prev(m1,c0))", "no_sync", "grad_sync(c1)".
func (a Action) String() string {
	switch a.Kind {
	case Forward, Backward, WeightGrad:
		return fmt.Sprintf("%v(m%d,c%d)", a.Kind, a.Microbatch, a.Chunk)
	case Comm:
		s := a.Call + "["
		for i, o := range a.Ops {
			if i > 0 {
				s += " "
			}
			s += o.String()
		}
		s += "]"
		if a.Async {
			s += "async"
		}
		return s
	case Wait:
		return fmt.Sprintf("wait(%v)", a.Op)
	case GradSync, ParamSync, EmbeddingWgrad:
		return fmt.Sprintf("%v(c%d)", a.Kind, a.Chunk)
	}
	return a.Kind.String()
}
