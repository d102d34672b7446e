package tokenizer

import "github.com/gotron/gotron/data"

// byteLevel is ByteLevelTokenizer, gotron's byte-level tokenizer (named after the
// reference's ByteLevelTokenizer class, which is not one of its --tokenizer-type values
// and defaults to 512 ids): data.ByteTokenizer, each byte of the text one id, 256 ids, and
// the end of document byte 0 (NUL, data.EndOfDocument), so byte-level corpora made by
// gotron preprocess and gotron's text reader are the same.
// Decode turns each run of invalid UTF-8, and each id outside [0, 256), into one U+FFFD.
type byteLevel struct{ data.ByteTokenizer }

func (byteLevel) Name() string   { return TypeByteLevel }
func (byteLevel) VocabSize() int { return 256 }
func (byteLevel) EOD() int32     { return data.EndOfDocument }
