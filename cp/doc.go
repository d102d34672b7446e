// Package cp is context parallelism: a long sequence split across the ranks
// of a context-parallel group, each holding 1/cp of every sequence's tokens
// and activations, with attention computed across them.
//
// The split is Megatron's load-balanced one for causal attention (Chunks,
// Split, Positions): the sequence is cut into 2·cp chunks and rank r holds
// chunks r and 2·cp−1−r, so every rank has the same share of the causal
// attention's work. Everything but attention is per token and runs on the
// local rows unchanged; Attention crosses the ranks in one of the ways
// Megatron's cp_comm_type names (p2p ring, all_gather, a2a, a2a+p2p), and
// gives the one-rank attention's rows up to float32 rounding. Packed
// documents (Options.Segments) restrict it to each token's document on
// every rank, from the whole rows' segment ids.
//
// Gradients of the replicated parameters are reduced over the dp×cp group,
// as data parallelism reduces them; the loss of a micro-batch is its token
// losses summed over the group divided by its tokens counted over the group.
package cp
