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

// readBlocks reads the whole checksum blocks of piece p (in file f, named
// name) that cover its elements [lo, hi), verifies each, and returns the
// values of [lo, hi).
func readBlocks(f *os.File, name string, p *Piece, lo, hi int64) ([]float32, error) {
	total := 4 * int64(p.Numel())
	first, last := 4*lo/BlockSize, (4*hi-1)/BlockSize
	start, end := first*BlockSize, min(total, (last+1)*BlockSize)
	buf := make([]byte, end-start)
	if _, err := f.ReadAt(buf, p.Pos+start); err != nil {
		return nil, fmt.Errorf("%s: reading %s %s: %w: the shard is truncated; restore it or load an earlier iteration", name, p.Key, p.Box, err)
	}
	for k := first; k <= last; k++ {
		b := buf[(k-first)*BlockSize : min(int64(len(buf)), (k-first+1)*BlockSize)]
		if got := crc32.Checksum(b, castagnoli); got != p.CRC[k] {
			return nil, &DamageError{File: name, Key: p.Key, Box: p.Box, Block: int(k), Got: got, Want: p.CRC[k]}
		}
	}
	off := 4*lo - start
	return decodeF32(buf[off : off+4*(hi-lo)]), nil
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

// decodeF32 returns the little-endian float32 values of b.
func decodeF32(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	if littleEndian && len(out) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
		return out
	}
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
