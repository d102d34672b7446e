// Package moe is Megatron-Core's mixture of experts (megatron/core/transformer/moe)
// for gotron: the router's top-k routing with its score functions, group-limited
// routing and expert bias, expert capacity and token dropping, the load-balancing
// and z losses, and the expert-bias update of finalize_model_grads.
//
// The routing arithmetic (Route, Capacity, LoadBalancingLoss, ZLoss,
// UpdateExpertBias) is plain functions over row-major float32 slices, forward and
// the gradient with respect to the router's logits, checked against an
// independent PyTorch reference (tools/torchref/moe_ref.py, testdata/moe_ref).
// Notation: T tokens, E experts, k experts chosen per token (moe_router_topk).
//
// On top of it: the autograd ops that move tokens to their experts and back
// (Permute, Unpermute) and run the experts' MLPs (GroupedMLP, SequentialMLP,
// SharedMLP); the token dispatchers across expert-parallel ranks
// (AllGatherExchange; EPExchange and ETPExchange for alltoall); Layer, one MoE
// layer wired from them over a Parallel grid of groups, whose Stats count an
// iteration's auxiliary losses and tokens per expert; and Metrics, those
// statistics summed over the world (Tally, Reduce) as gotron train --log-json
// writes them.
package moe
