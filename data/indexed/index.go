package indexed

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"
)

// The fixed header of a .idx file: the magic, then little-endian fields at these offsets.
const (
	magic          = "MMIDIDX\x00\x00"
	version        = 1
	offVersion     = 9  // uint64, always 1
	offDType       = 17 // uint8, a DType code
	offNumSeqs     = 18 // uint64, the number of sequences S
	offNumDocIdx   = 26 // uint64, the number of document indices D (documents + 1)
	headerSize     = 34 // where the sequence lengths begin
	lengthSize     = 4  // int32 per sequence length
	pointerSize    = 8  // int64 per sequence pointer
	documentIdSize = 8  // int64 per document index
)

// rewrite is the fix for a damaged or foreign file.
const rewrite = "write the dataset again with gotron preprocess or Megatron's preprocess_data.py"

// index is a validated .idx: its dtype and the three arrays, which alias the file's bytes
// where the CPU allows (see views).
type index struct {
	dtype     DType
	lengths   []int32 // [S] tokens per sequence
	pointers  []int64 // [S] byte offset of each sequence in the .bin
	docs      []int64 // [D] sequence index where each document starts; docs[D-1] = S
	numTokens int64   // Σ lengths
}

// parseIndex validates idx, the whole .idx file named idxName in errors, against a .bin
// of binSize bytes named binName, and returns its arrays. Every error is one line naming
// the file, the offset and what to do.
func parseIndex(idx []byte, idxName, binName string, binSize int64) (index, error) {
	n := uint64(len(idx))
	if n < headerSize {
		k := min(len(idx), len(magic))
		if string(idx[:k]) != magic[:k] {
			return index{}, badMagic(idx, idxName)
		}
		return index{}, fmt.Errorf("%s: truncated index: %d bytes, the header alone takes %d (magic, version, dtype, two counts): the file was cut short; %s",
			idxName, len(idx), headerSize, rewrite)
	}
	if string(idx[:len(magic)]) != magic {
		return index{}, badMagic(idx, idxName)
	}
	if v := binary.LittleEndian.Uint64(idx[offVersion:]); v != version {
		return index{}, fmt.Errorf("%s: index version %d at offset %d, want %d: gotron reads version 1 of Megatron's indexed dataset format only; %s",
			idxName, v, offVersion, version, rewrite)
	}
	dt := DType(idx[offDType])
	if !dt.Valid() {
		return index{}, fmt.Errorf("%s: unknown token dtype code %d at offset %d (known: %s): the file is damaged or of another format; %s",
			idxName, uint8(dt), offDType, knownCodes, rewrite)
	}
	numSeqs := binary.LittleEndian.Uint64(idx[offNumSeqs:])
	numDocs := binary.LittleEndian.Uint64(idx[offNumDocIdx:])
	if numDocs == 0 {
		return index{}, fmt.Errorf("%s: document index count 0 at offset %d: an index holds at least the leading document index 0; %s",
			idxName, offNumDocIdx, rewrite)
	}
	// avail/12 and the rest: no overflow however large the counts.
	avail := n - headerSize
	if numSeqs > avail/(lengthSize+pointerSize) || numDocs > (avail-numSeqs*(lengthSize+pointerSize))/documentIdSize {
		need := "more than 2^63"
		if numSeqs < 1<<59 && numDocs < 1<<59 {
			need = fmt.Sprint(headerSize + numSeqs*(lengthSize+pointerSize) + numDocs*documentIdSize)
		}
		return index{}, fmt.Errorf("%s: truncated index: %d sequences (offset %d) and %d document indices (offset %d) need the file to end at offset %s, it ends at offset %d: the file was cut short; %s",
			idxName, numSeqs, offNumSeqs, numDocs, offNumDocIdx, need, n, rewrite)
	}
	S, D := int(numSeqs), int(numDocs)
	offPointers := headerSize + lengthSize*S
	offDocs := offPointers + pointerSize*S
	end := offDocs + documentIdSize*D
	if extra := len(idx) - end; extra > 0 {
		if extra == S {
			return index{}, fmt.Errorf("%s: %d bytes after the document indices (offset %d), one per sequence: a multimodal index with sequence modes, which gotron does not read: pass a text-only dataset",
				idxName, extra, end)
		}
		return index{}, fmt.Errorf("%s: %d trailing bytes after the document indices, from offset %d to %d: the file is damaged or was appended to; %s",
			idxName, extra, end, len(idx), rewrite)
	}
	ix := index{
		dtype:    dt,
		lengths:  int32s(idx[headerSize:offPointers]),
		pointers: int64s(idx[offPointers:offDocs]),
		docs:     int64s(idx[offDocs:end]),
	}
	size := int64(dt.Size())
	var next int64 // where sequence i must start: Σ_{j<i} lengths[j]·size ≤ binSize
	for i, l := range ix.lengths {
		if l < 0 {
			return index{}, fmt.Errorf("%s: sequence %d has negative length %d (offset %d): the index is damaged; %s",
				idxName, i, l, headerSize+lengthSize*i, rewrite)
		}
		if p := ix.pointers[i]; p != next {
			if i == 0 {
				return index{}, fmt.Errorf("%s: sequence 0 starts at byte %d of %s (pointer at offset %d), want 0: the index is damaged; %s",
					idxName, p, binName, offPointers, rewrite)
			}
			return index{}, fmt.Errorf("%s: sequence %d starts at byte %d of %s (pointer at offset %d), want %d = sequence %d's pointer %d + its length %d × %d bytes: the pointers do not match the lengths; %s",
				idxName, i, p, binName, offPointers+pointerSize*i, next, i-1, ix.pointers[i-1], ix.lengths[i-1], size, rewrite)
		}
		next += int64(l) * size
		if next > binSize {
			return index{}, fmt.Errorf("%s: sequence %d ends at byte %d, beyond the end of %s (%d bytes): the .bin was cut short or belongs to another index; %s",
				idxName, i, next, binName, binSize, rewrite)
		}
	}
	if next != binSize {
		return index{}, fmt.Errorf("%s: %s holds %d bytes, the index describes %d (%d tokens × %d bytes of %s): the .bin belongs to another index or was appended to; %s",
			idxName, binName, binSize, next, next/size, size, dt, rewrite)
	}
	ix.numTokens = next / size
	if d0 := ix.docs[0]; d0 != 0 {
		return index{}, fmt.Errorf("%s: the first document index is %d (offset %d), want 0: the index is damaged; %s",
			idxName, d0, offDocs, rewrite)
	}
	for j := 1; j < D; j++ {
		d, prev := ix.docs[j], ix.docs[j-1]
		switch {
		case d > int64(S):
			return index{}, fmt.Errorf("%s: document index %d is %d (offset %d), beyond the %d sequences: the index is damaged; %s",
				idxName, j, d, offDocs+documentIdSize*j, S, rewrite)
		case d < prev:
			return index{}, fmt.Errorf("%s: document index %d is %d (offset %d), less than document index %d (%d): document indices never decrease; the index is damaged; %s",
				idxName, j, d, offDocs+documentIdSize*j, j-1, prev, rewrite)
		}
	}
	if last := ix.docs[D-1]; last != int64(S) {
		return index{}, fmt.Errorf("%s: the last document index is %d (offset %d), want the sequence count %d: sequences [%d, %d) belong to no document; the index is damaged; %s",
			idxName, last, offDocs+documentIdSize*(D-1), S, last, S, rewrite)
	}
	return ix, nil
}

// badMagic is the error for a file that does not start with the magic.
func badMagic(idx []byte, idxName string) error {
	return fmt.Errorf("%s: not an indexed dataset index (magic %q, want %q at offset 0): pass the prefix of a dataset written by gotron preprocess or Megatron's preprocess_data.py",
		idxName, idx[:min(len(idx), len(magic))], magic)
}

// views reports whether the index arrays may alias the file's bytes: on a little-endian
// CPU that loads unaligned words (the arrays start at offset 34, so int32 and int64
// elements are not aligned). Elsewhere they are decoded into fresh slices.
var views = isLittleEndian() && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" ||
	runtime.GOARCH == "386" || runtime.GOARCH == "ppc64le")

func isLittleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// int32s returns b (a multiple of 4 bytes) as little-endian int32s.
func int32s(b []byte) []int32 {
	if len(b) == 0 {
		return []int32{}
	}
	if views {
		return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// int64s returns b (a multiple of 8 bytes) as little-endian int64s.
func int64s(b []byte) []int64 {
	if len(b) == 0 {
		return []int64{}
	}
	if views {
		return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), len(b)/8)
	}
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}
