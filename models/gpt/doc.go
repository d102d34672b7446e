// Package gpt is gotron's GPT: Megatron-Core's GPTModel with the "local"
// layer spec, parameters named as Megatron names them.
//
//	h = word_embeddings[ids] + position_embeddings[0:s]          [s, b, h]
//	each layer:  h = h + linear_proj(attention(input_layernorm(h)))
//	             h = h + linear_fc2(gelu(linear_fc1(pre_mlp_layernorm(h))))
//	logits = final_layernorm(h) · word_embeddingsᵀ               [s, b, V]
//	loss_t = cross_entropy(logits_t, label_t)
//
// With mtp_num_layers D (MTPLayer), D multi-token-prediction depths follow
// the final layernorm, on the chunk with the loss or on one of their own
// (ChunkSpec.MTP): depth k embeds the ids rolled left by k + 1 (MTPBatch),
// projects [enorm(e); hnorm(h)] to h, runs one transformer layer and its
// own final norm, and its logits through the shared output layer predict
// the labels rolled as far; the loss chunk returns the depths' per-token
// losses after the main ones. With multi_latent_attention every layer's
// attention is MLA's.
//
// With per-token position ids (Inputs.PositionIDs, --reset-position-ids)
// the embedding adds position_embeddings[position_ids] and RoPE turns each
// token by its own position; with segments (Inputs.Segments,
// --reset-attention-mask) a token attends only to the earlier tokens of its
// own document.
//
// Activations are sequence-first, [s, b, h], as in Megatron. The model is
// built from a TransformerConfig and initialised from a seeded generator in a
// fixed parameter order, each weight drawn whole, so the numbers do not
// depend on how the model is later split across ranks.
package gpt
