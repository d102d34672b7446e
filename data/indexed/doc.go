// Package indexed reads and writes Megatron's indexed dataset, the tokenized corpus
// format of Megatron-Core's IndexedDataset and IndexedDatasetBuilder
// (megatron/core/datasets/indexed_dataset.py), which tools/preprocess_data.py writes and
// --data-path reads. A dataset is two files sharing a prefix: PREFIX.bin holds the tokens,
// PREFIX.idx says where each sequence and each document is. Files move between gotron and
// Megatron unchanged.
//
// # Format
//
// Every integer is little-endian. With S sequences, D document indices (D = documents + 1)
// and a token dtype of itemsize bytes, the .idx is
//
//	offset      bytes  type          field
//	0           9      bytes         magic "MMIDIDX\x00\x00"
//	9           8      uint64        version, 1
//	17          1      uint8         dtype code (below)
//	18          8      uint64        S, the number of sequences
//	26          8      uint64        D, the number of document indices
//	34          4·S    int32[S]      sequence lengths, in tokens
//	34+4·S      8·S    int64[S]      sequence pointers: byte offset of each sequence in the .bin
//	34+12·S     8·D    int64[D]      document indices
//	34+12·S+8·D                      end of file (a multimodal index adds S int8 modes)
//
// and the .bin is the tokens of sequences 0..S−1 back to back, itemsize bytes each, with
// nothing before, between or after them, so
//
//	pointer[0] = 0,  pointer[i] = pointer[i−1] + length[i−1]·itemsize,
//	size of .bin = pointer[S−1] + length[S−1]·itemsize = Σ length · itemsize.
//
// The dtype codes ([DType]) are NumPy's types in Megatron's numbering:
//
//	code  1      2     3      4      5      6        7        8
//	type  uint8  int8  int16  int32  int64  float64  float32  uint16
//	size  1      1     2      4      8      8        4        2
//
// preprocess_data.py picks uint16 for a vocabulary under 65500 tokens
// and int32 otherwise ([OptimalDType]).
//
// # Documents and sequences
//
// A document is a run of consecutive sequences: with preprocess_data.py's
// --split-sentences each sentence is a sequence, otherwise a document is one sequence.
// The document indices start with 0 and, after each document, record the number of
// sequences written so far: document j is sequences [docs[j], docs[j+1]). They never
// decrease and end at S; an empty document (no sequences) repeats the previous entry.
// Example: documents of 2, 0 and 1 sequences give D = 4 and indices 0, 2, 2, 3.
// Megatron's GPTDataset ignores the document indices: it splits, shuffles and
// concatenates sequences (its "documents" are the sequences), cutting training samples
// across their boundaries.
//
// # Reading and writing
//
// [Open] maps both files read-only and validates everything but the token values (which
// [Dataset.CheckTokens] checks against a vocabulary); the index arrays are views into the
// mapping. [Dataset.Tokens] reads part of a sequence as int32, like Megatron's
// get(idx, offset, length). [Create] returns a [Writer] whose [Writer.AddDocument] is
// Megatron's add_document(tokens, lengths) and whose [Writer.Finish] is its finalize,
// except that the files appear atomically under their final names.
//
// tools/torchref/indexed_ref.py writes the fixtures in testdata/ from the format alone;
// the tests read them back and write them again byte for byte.
package indexed
