// Package p2p moves activations and their gradients between neighbouring
// pipeline stages: gotron's form of Megatron-Core's P2PCommunicator
// (megatron/core/pipeline_parallel/p2p_communication.py, core_v0.19;
// docs/SEMANTICS.md § Pipeline communication), built on a comm.Group holding
// the ranks of one pipeline.
//
// # Peers and stages
//
// Stage r's next peer is group rank (r+1) mod P and its previous peer
// (r−1) mod P: a ring, as in the reference. The interleaved schedule uses
// the wrap-around (the last rank's chunk v feeds the first rank's chunk
// v+1); everywhere else the callers' stage flags keep a first stage from
// receiving from, and a last stage from sending to, the other end.
//
// # Messages
//
// Every tensor is float32 in gotron. On the wire it travels as the
// configured pipeline dtype (Config.PipelineDType): float32 as it is,
// bfloat16 or float16 rounded to nearest, ties to even, and widened back
// exactly on receipt, so a received value equals the sender's value after
// one rounding to that type. A received tensor is always a fresh, contiguous
// allocation of the received shape, never a view of a sender's memory.
//
// With Config.VariableSeqLengths (or MTPStandalone) each exchange is
// preceded by an exchange of the 3-dim shapes (three int64s per message) and
// the receive buffers are sized from what arrives; otherwise the caller
// passes the shape, typically (s, b, h) = (seq_length/cp[/tp with sequence
// parallel], micro_batch_size, hidden_size).
//
// # Ordering
//
// Point-to-point messages in comm are matched per ordered pair of ranks,
// first in, first out, so two stages agree on which message is which only
// if, between any two ranks, the sender's messages and the receiver's
// receives come in the same order. Every exchange here issues its sends in
// the order (next, prev) and its receives in the order (prev, next) as far
// as one peer is concerned, which makes the forward message (activation)
// precede the backward one (gradient) on every pair; the order matters only
// when P = 2, where the next and previous peers are one rank. See
// Communicate for the batched and unbatched orders and for where this
// departs from the reference.
//
// # Calls
//
// The named methods (RecvForward, SendForwardRecvBackward, …) are the
// reference's, one tensor per call; Communicate is the exchange under all of
// them. Methods that only make sense on some stages take the stage flag the
// schedule computes (with virtual pipelining, "first stage" means the first
// pipeline rank running its first model chunk) and do nothing on the others,
// returning nil tensors, as in the reference.
package p2p
