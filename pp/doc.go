// Package pp is gotron's pipeline parallelism, Megatron-Core's
// pipeline_parallel package.
//
// Schedules are data. The pure functions of the reference come first:
// GetPPRankMicrobatches (warmup and steady-state counts), GetScheduleTable
// and ConvertScheduleTableToOrder (the interleaved schedule's table and its
// signed-chunk order) and ValidateInterleaved (the microbatch group rules).
// From them Build makes each pipeline rank's Schedule: an ordered list of
// Actions — forward or backward of microbatch m on model chunk c, an
// exchange of activations or gradients with the neighbouring stages, a
// wait for an overlapped exchange, entering or leaving no_sync — for the
// reference's three schedules (no pipelining, 1F1B, interleaved 1F1B) and
// for the zero-bubble ZB-H1, ZB-H2 and ZB-V (ZeroBubbleH1, ZeroBubbleH2,
// ZeroBubbleV, Config.Schedule "zb-h1", "zb-h2", "zb-v") and DeepSeek's
// DualPipeV (DualPipeV, "dualpipev"), whose backward is split
// (Schedule.SplitBackward): a Backward action computes the input
// gradient (autograd.BackwardSplit) and a later WeightGrad action ("W")
// the parameters' gradients, which the verifier checks come once, after
// their backward, with no_sync left only for the last. Under
// defer_embedding_wgrad_compute (DeferEmbeddingWgrad) the last stage's
// backwards leave the output layer's weight gradients to one
// EmbeddingWgrad action in the flush.
// A Schedule's Placement (config.PipelinePlacement) says which stage of
// the model each chunk holds, and so where its tensors come from and go
// to: the reference's loop (chunk v of rank r is stage v·P + r) or the V
// of ZB-V and DualPipeV (stages r and 2P − 1 − r), whose last rank hands its chunk 0's output
// to its chunk 1 without a message (p2p's HandOver) and whose chunk 1
// sends its activations to the previous rank; the verifier, the
// simulator and the executor all route by it, and the executor carries
// gradients on a communicator of their own (P2P.GradComm) where both
// kinds travel both ways between two ranks.
// Verify plays every rank's list against the others (each send meets its
// receive, no deadlock, every forward before its backward) and reports the
// peak number of live activations; FormatGrid and FormatJSON print them
// (gotron inspect schedule). Simulate plays the same lists with a clock
// (StageTimes for F, B, W and a message) and reports the makespan (the
// longest stage's time from its first computation, the zero-bubble
// paper's cost) and the bubble rate.
//
// The executors walk a rank's list: GetForwardBackwardFunc returns the
// reference's forward_backward_no_pipelining, _without_interleaving or
// _with_interleaving, which run a ForwardStepFunc per Forward action
// (forward_step, with the reference's loss scaling), backward from the
// saved graph node with the received gradient per Backward action
// (backward_step), the P2P communicator (package pp/p2p) per exchange, and
// the config's no_sync_func, grad_sync_func, param_sync_func and
// finalize_model_grads_func callbacks, so that data parallelism reduces the
// gradients once per iteration. With deallocate_pipeline_outputs a stage's
// output is released once sent.
//
// A 1F1B rank r of P keeps at most min(P − r, M) microbatches' activations,
// whatever M (TestOneFOneBActivationsBounded), under ZB-H1 min(P, M),
// under ZB-H2 min(2P − 1, M) (HeldMicrobatches), under ZB-V 2P chunks',
// P microbatches of the rank's layers, and under DualPipeV 2P + 1 chunks'; 1F1B's pipeline bubble is
// (P − 1)/(V·M + P − 1) of the iteration (Narayanan et al. 2021, arXiv
// 2104.04473 §2.2). A Recorder's Record, given as Args.Trace, records what each
// rank executed; GatherTimeline brings every rank's record to rank 0 as a
// Timeline, which measures each rank's bubble (Bubbles, Bubble,
// MeanBubble beside TheoreticalBubble) and draws the iteration as SVG
// (gotron train --profile-schedule).
package pp
