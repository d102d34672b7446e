// Package gptdata is Megatron-Core's GPTDataset over indexed datasets
// (--data-path, --split, --train/valid/test-data-path, --data-cache-path):
// the same samples in the same order as the reference, from the same seed.
//
// # Samples
//
// A split of a dataset of N documents holds documents [round(lo·N),
// round(hi·N)) (Python's round, half to even; see [ParseSplit] for lo and hi).
// With T its tokens per epoch and n the samples asked for, the number of
// epochs E is the least E ≥ 1 with E·T ≥ n·seq + 1. From
// numpy.random.RandomState(seed) (package data/internal/nprand), used in this
// order, come three index arrays:
//
//   - document index, int32 [E·docs]: the split's documents repeated E times
//     and shuffled. When E > 1 and the final epoch would contribute fewer
//     than int(0.80·((T−1) div seq)) of the n samples (separate final epoch),
//     the first E−1 epochs are shuffled together and then the final epoch
//     alone.
//   - sample index, int32 [S+1, 2]: row k is the position in the document
//     index and the token offset where sample k starts, S = (E·T − 1) div seq
//     (the reference's int64 variant needs a document index of 2^31
//     entries, which Build refuses).
//     Sample k is the seq+1 tokens of the document stream from k·seq: samples
//     overlap by one token (the label of the last input).
//   - shuffle index, uint32 (int64 when S ≥ 2^32−2) [S]: arange(S) shuffled;
//     with a separate final epoch arange(S′) and arange(S′, S) shuffled one
//     after the other, S′ = ((E−1)·T − 1) div seq.
//
// Sample i of the dataset is unshuffled sample shuffle[i]. Its inputs are
// tokens [0, seq) and its labels tokens [1, seq]. The loss mask is 1, 0 where
// the label is the pad id and, with --eod-mask-loss, where the input is the
// end-of-document token; --reset-position-ids restarts the positions after
// every input end of document; --reset-attention-mask numbers the documents
// (see [Sample]); pad ids read as token 0.
//
// # Blends
//
// A blend of datasets with weights w (normalised to sum 1) that must give n
// samples builds, per dataset, ceil(ceil(n·w)·1.005) samples of its split (the
// reference's 0.005 surplus) and blends sum ceil(n·w) samples: sample k comes
// from the dataset d with the largest w_d·max(k, 1) − taken_d (the first one
// on ties), its next unused sample. A blend of prefixes without weights
// builds one epoch of each and weighs them by their lengths, with
// min(n, Σ lengths) samples. See [Build] for which inputs give a blend.
//
// # Cache
//
// The index arrays are written as numpy .npy files (format 1.0, the bytes
// numpy.save writes) with a description, under --data-cache-path, or beside
// the data when it is not given (<prefix>/cache/GPTDataset_indices, as the
// reference does; blends are not cached then). The names are the
// reference's: {md5}-GPTDataset-{split}-{description.txt, document_index.npy,
// sample_index.npy, shuffle_index.npy} and {md5}-BlendedDataset-{split}-
// {description.txt, dataset_index.npy (int16), dataset_sample_index.npy
// (int64)}, md5 the hex MD5 of the description. The description is the
// reference's JSON (json.dumps(..., indent=4)) without the "tokenizer" key,
// which the indices do not depend on; so gotron's names differ from
// Megatron's and neither reads the other's files. See [Dataset.Describe].
//
// Files are written to a temporary name and renamed, the description last, so
// a reader sees whole files or none, and the cache is complete when the
// description exists. Present files are loaded and checked (dtype, shape,
// every index within the dataset, the description identical); a file that
// fails is an error naming it and asking to delete it. Within a process the
// ranks share one copy of each index (built or loaded once).
package gptdata
