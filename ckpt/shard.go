package ckpt

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"unsafe"
)

// PieceData is a box of a tensor and its values, to be written.
type PieceData struct {
	Key  string
	Box  Box
	Data []float32 // Box.Numel() values, row-major
}

// ShardFile names rank's shard in an iteration's directory.
func ShardFile(rank int) string { return fmt.Sprintf("shard_%05d.bin", rank) }

// WriteShard writes rank's pieces into dir as one file, synced, and
// returns its index (positions and checksums) for the manifest.
func WriteShard(dir string, rank int, pieces []PieceData) (Shard, error) {
	s := Shard{File: ShardFile(rank), Rank: rank}
	f, err := os.Create(filepath.Join(dir, s.File))
	if err != nil {
		return s, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var pos int64
	var block [BlockSize]byte
	for _, p := range pieces {
		if len(p.Data) != p.Box.Numel() {
			f.Close()
			return s, fmt.Errorf("%s %s: %d values for %d elements", p.Key, p.Box, len(p.Data), p.Box.Numel())
		}
		piece := Piece{Key: p.Key, Box: p.Box, Pos: pos}
		for lo := 0; lo < len(p.Data); lo += BlockSize / 4 {
			vals := p.Data[lo:min(len(p.Data), lo+BlockSize/4)]
			b := encodeF32(block[:4*len(vals)], vals)
			piece.CRC = append(piece.CRC, crc32.Checksum(b, castagnoli))
			if _, err := w.Write(b); err != nil {
				f.Close()
				return s, err
			}
		}
		pos += 4 * int64(len(p.Data))
		s.Pieces = append(s.Pieces, piece)
	}
	s.Size = pos
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		return s, err
	}
	return s, nil
}

// blockReader reads piece p of shard f (at path) through its checksum
// blocks, verifying each block when it is read and keeping the last one,
// so that consecutive runs of a box cost one read per block.
type blockReader struct {
	f    *os.File
	path string
	p    *Piece
	k    int     // the block in *buf (-1: none)
	buf  *[]byte // grown to the largest block read, shared by a Reader's reads
}

// read copies the piece's elements [flat, flat+len(dst)) into dst.
func (b *blockReader) read(dst []float32, flat int) error {
	total := 4 * int64(b.p.Numel())
	for lo, hi := 4*int64(flat), 4*int64(flat+len(dst)); lo < hi; {
		k := int(lo / BlockSize)
		if k != b.k {
			start, end := int64(k)*BlockSize, min(total, int64(k+1)*BlockSize)
			if int64(cap(*b.buf)) < end-start {
				*b.buf = make([]byte, end-start)
			}
			buf := (*b.buf)[:end-start]
			b.k = -1
			if _, err := b.f.ReadAt(buf, b.p.Pos+start); err != nil {
				return &MissingError{File: b.path, Key: b.p.Key, Box: b.p.Box, First: k, Blocks: 1, Cause: err.Error()}
			}
			if got := crc32.Checksum(buf, castagnoli); got != b.p.CRC[k] {
				return &DamageError{File: b.path, Key: b.p.Key, Box: b.p.Box, Block: k, Got: got, Want: b.p.CRC[k]}
			}
			b.k = k
		}
		blockStart := int64(k) * BlockSize
		end := min(hi, blockStart+BlockSize)
		n := (end - lo) / 4
		decodeInto(dst[:n], (*b.buf)[lo-blockStart:end-blockStart])
		dst, lo = dst[n:], end
	}
	return nil
}

// DamageError reports a checksum that does not match: a flipped bit, a
// changed or swapped piece.
type DamageError struct {
	File, Key string
	Box       Box
	Block     int
	Got, Want uint32
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("%s is damaged: tensor %s, piece %s, block %d has checksum %08x, the manifest records %08x: restore the file or load an earlier iteration",
		e.File, e.Key, e.Box, e.Block, e.Got, e.Want)
}

// littleEndian says whether float32 values are stored as the files store
// them, so that encoding and decoding are copies.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// encodeF32 writes vals into b (4·len(vals) bytes) as little-endian
// float32 and returns b.
func encodeF32(b []byte, vals []float32) []byte {
	if littleEndian && len(vals) > 0 {
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*len(vals)))
		return b
	}
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// decodeInto writes the little-endian float32 values of b into dst
// (len(b)/4 of them).
func decodeInto(dst []float32, b []byte) {
	if littleEndian && len(dst) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(b)), b)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}
