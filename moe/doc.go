// Package moe is Megatron-Core's mixture of experts (megatron/core/transformer/moe)
// for gotron: the router's top-k routing with its score functions, group-limited
// routing and expert bias, expert capacity and token dropping, the load-balancing
// and z losses, and the expert-bias update of finalize_model_grads.
//
// This first part holds the routing arithmetic on one rank as plain functions over
// row-major float32 slices — forward and the gradient of each function with respect
// to the router's logits — checked against an independent PyTorch reference
// (tools/torchref/moe_ref.py, testdata/moe_ref). Notation: T tokens, E experts, k
// experts chosen per token (moe_router_topk).
package moe
