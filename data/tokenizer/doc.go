// Package tokenizer provides the tokenizers of Megatron's --tokenizer-type, for
// `gotron preprocess` (text to token ids) and `gotron train` (vocabulary size, end of
// document, decoding samples). [New] builds one from the flags ([Options]); [Types]
// lists the names. Every [Tokenizer] is safe for concurrent use, and its Decode always
// returns valid UTF-8.
//
// # Types
//
//   - GPT2BPETokenizer: GPT-2's byte-level BPE, 50257 ids, end of document
//     "<|endoftext|>" = 50256. From --vocab-file vocab.json and --merge-file merges.txt, or,
//     with neither, from GPT-2's vocabulary built into gotron (below). [WriteGPT2Files]
//     writes the two files.
//   - HuggingFaceTokenizer: a Hugging Face tokenizer.json (--tokenizer-model: the file or
//     its directory) of the same kind: model BPE, pre-tokenizer ByteLevel, decoder
//     ByteLevel, no normalizer (GPT-2, RoBERTa and many others); other kinds are refused
//     with an error naming the field. Its vocabulary size is the largest id of model.vocab
//     and added_tokens plus one (Hugging Face's len(tokenizer) counts the distinct tokens,
//     the same when the ids have no gaps).
//   - NullTokenizer: the text is already ids, "15 496 0" (--vocab-size N: N ids, end of
//     document N−1, as Megatron-Core's NullTokenizer).
//   - ByteLevelTokenizer: one id per byte, 256 ids, end of document 0 (gotron's
//     data.ByteTokenizer; the reference's ByteLevelTokenizer class with its default
//     end-of-sequence id 0 and no special tokens).
//
// # Byte-level BPE
//
// GPT2BPETokenizer and HuggingFaceTokenizer encode as Hugging Face's tokenizers library
// does (which Megatron's GPT2BPETokenizer and HuggingFaceTokenizer call):
//
//  1. The added tokens (tokenizer.json's added_tokens; GPT2BPETokenizer's is
//     "<|endoftext|>") are cut out of the text as whole strings, leftmost and longest
//     first, with their single_word, lstrip and rstrip options.
//  2. Each other segment (after a space is put before it when the pre-tokenizer has
//     add_prefix_space) is cut into pieces by GPT-2's pattern
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//     (written by hand: Go's regexp has no lookahead).
//  3. Each piece's UTF-8 bytes start as the ids of single bytes (the vocabulary spells
//     byte b as one printable rune, GPT-2's bytes_to_unicode: 'Ġ' is the space), and the
//     adjacent pair with the lowest merge rank is merged, leftmost first, until no pair
//     has a merge. Pieces' ids are cached (up to 131072 pieces of up to 256 bytes, shared
//     by all goroutines), so encoding real text runs at about 75–110 MB/s on one core.
//  4. The post-processor's ids go around the text's: none for GPT-2; tokenizer.json's
//     TemplateProcessing ("single"), RobertaProcessing and BertProcessing are read.
//
// Decoding joins the tokens' bytes (an added token's own text), writes U+FFFD for an id
// that is not a token, and replaces each run of invalid UTF-8 by U+FFFD: text made of
// whole characters decodes back exactly; a sample cut inside a character does not.
//
// The end of document of HuggingFaceTokenizer is the tokenizer's eos_token, as the
// reference's: tokenizer_config.json's "eos_token" next to tokenizer.json, else
// special_tokens_map.json's, else the first of "<|endoftext|>", "</s>", "<|end_of_text|>",
// "<eos>" that is a token.
//
// # GPT-2's built-in vocabulary
//
// Without --vocab-file and --merge-file, GPT2BPETokenizer reads GPT-2's vocabulary from
// r50k_base.tiktoken, embedded by the Go module github.com/pkoukk/tiktoken-go-loader: one
// line per token, its bytes in base64 and its rank. The rank is the token's id in GPT-2's
// encoder.json, and the tokens after the 256 single bytes are the results of GPT-2's 50000
// merges in merges.txt's order. The merge that makes the token of rank r is recovered by
// encoding the token's bytes with the tokens of rank < r only (joining the adjacent pair
// whose concatenation has the lowest rank, as tiktoken encodes) until two parts are left.
// tools/torchref/gpt2_bpe_ref.py checks, independently, that this gives 50000 merges in
// rank order and that encoding by them equals encoding by ranks; the tests compare the
// ids with its fixtures and with ids published for GPT-2.
package tokenizer
