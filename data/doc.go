// Package data provides gotron's training data: datasets that hand the trainer the rows of
// each step's global batch, the byte-level tokenizer, and text corpora.
//
// # Datasets
//
// A [Dataset] is a pure function from (step, global row) to a row of input ids, labels and
// loss mask (a [Batch] holds several rows, row-major [rows, seq]). There is no iterator:
// the data position is fully determined by the training step, so every parallel layout
// sees the same global batch, whichever rank asks for which rows, and a run resumed from a
// checkpoint at step s continues exactly as if it had not stopped. Two implementations:
//
//   - [MockDataset], Megatron's --mock-data made reproducible across languages: arithmetic
//     progressions of tokens drawn by [Splitmix64] from (seed, step, row), the formula of
//     the gotron reference GPT (docs/SEMANTICS.md § Mock data).
//   - [TextDataset], windows of seq+1 byte tokens over a text [Corpus], in a seeded
//     order that changes every epoch.
//
// A [Step] names a global batch by its size and the samples consumed before it; under
// --rampup-batch-size the size grows with the samples consumed ([Ramp], Megatron's
// ramp-up calculator, in exact integer arithmetic), and under --step-batch-size-schedule
// it is the batch of the last threshold passed ([StepSchedule], Megatron's step
// calculator; [ParseStepSchedule] reads its text).
//
// # Text
//
// [LoadTextCorpus] reads files and directory trees; [GoRootCorpus] is the default corpus,
// the Go sources of the installed Go distribution, read at run time. A corpus is split
// into train and valid by held-out files ([Corpus.Split]). Text is tokenized byte-level
// ([ByteTokenizer], 256 tokens) and documents are concatenated, each ended by byte 0,
// [EndOfDocument], which does not occur in text (files containing it are skipped as
// binary).
package data
