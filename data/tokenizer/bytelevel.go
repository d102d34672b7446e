package tokenizer

import "github.com/gotron/gotron/data"

// byteLevel is ByteLevelTokenizer, gotron's byte-level tokenizer (the reference's
// ByteLevelTokenizer class, with 256 ids and no special tokens): data.ByteTokenizer, each
// byte of the text one id, and the end of document byte 0 (NUL, data.EndOfDocument, as
// the reference's default eos id 0), so byte-level corpora made by either are the same.
// Decode turns each run of invalid UTF-8, and each id outside [0, 256), into one U+FFFD.
type byteLevel struct{ data.ByteTokenizer }

func (byteLevel) Name() string   { return TypeByteLevel }
func (byteLevel) VocabSize() int { return 256 }
func (byteLevel) EOD() int32     { return data.EndOfDocument }
