package gptdata

// Source is one tokenized dataset (a --data-path prefix), satisfied by
// *indexed.Dataset.
type Source interface {
	// Prefix returns the dataset's path prefix (the .bin/.idx files without
	// their extensions), as the description and the default cache path use it.
	Prefix() string
	// SequenceLengths returns the number of tokens of every sequence.
	SequenceLengths() []int32
	// Tokens appends tokens [offset, offset+n) of sequence seq to dst and
	// returns the extended slice. It is safe for concurrent use.
	Tokens(dst []int32, seq, offset, n int) []int32
}

// Config holds the options of the datasets, with Megatron's flags.
type Config struct {
	// SeqLength is --seq-length: every sample holds SeqLength+1 tokens
	// (the reference's add_extra_token_to_sequence). At least 2.
	SeqLength int
	// Seed is --seed, the seed of numpy.random.RandomState: [0, 2^32−1].
	Seed uint64
	// Split is --split ("969,30,1"), for [Build]. Empty means the
	// reference's default "969, 30, 1". [BuildPerSplit] needs it empty.
	Split string
	// CachePath is --data-cache-path, the directory of the index files.
	// Empty: <prefix>/cache/GPTDataset_indices for each dataset, and blends
	// are not cached.
	CachePath string
	// EOD is the tokenizer's end-of-document token.
	EOD int32
	// ResetPositionIDs, ResetAttentionMask and EODMaskLoss are
	// --reset-position-ids, --reset-attention-mask and --eod-mask-loss.
	ResetPositionIDs, ResetAttentionMask, EODMaskLoss bool
	// PadID is the tokenizer's pad token, or nil when it has none (or it
	// collides with another special token): the reference's −1 then, which
	// no data token equals. A label equal to it is masked out of the loss
	// and a token equal to it reads as 0.
	PadID *int32
}

// pad returns the pad id in effect.
func (c *Config) pad() int32 {
	if c.PadID == nil {
		return -1
	}
	return *c.PadID
}

// Blend is the value of --data-path (or of one of --train-data-path,
// --valid-data-path, --test-data-path): dataset prefixes with their weights,
// or nil weights to weigh the datasets by their sizes.
type Blend struct {
	Prefixes []string
	Weights  []float64
}

// Dataset is a built split: Len samples of SeqLength+1 tokens.
type Dataset interface {
	// Len returns the number of samples.
	Len() int
	// SeqLength returns the sequence length (the samples' tokens minus one).
	SeqLength() int
	// Sample returns sample i. It panics unless 0 ≤ i < Len(): the caller
	// computes i, so that is its bug. Safe for concurrent use.
	Sample(i int) Sample
	// Describe returns the dataset's description, the JSON text that names
	// its cache files (the reference's unique description).
	Describe() string
}

// Sample is one sample of a Dataset, as the reference's __getitem__ returns
// it.
type Sample struct {
	// Tokens are the seq+1 tokens: inputs Tokens[:seq], labels
	// Tokens[1:]. Pad ids read as 0.
	Tokens []int32
	// LossMask weights each label, [seq]: 0 where the label is the pad id
	// and, with EODMaskLoss, where the input is the end-of-document token;
	// 1 elsewhere.
	LossMask []float32
	// PositionIDs, with ResetPositionIDs (nil otherwise), hold each input's
	// position, [seq]: 0 at the first input and after every input
	// end-of-document token, else one more than the previous input's.
	PositionIDs []int32
	// Segments, with ResetAttentionMask (nil otherwise), number the
	// documents of the inputs, [seq]: Segments[t] is the number of
	// end-of-document tokens among inputs 0..t−1. Input t attends to input
	// u ≤ t only when Segments[u] == Segments[t], which is the reference's
	// attention mask.
	Segments []int32
}
