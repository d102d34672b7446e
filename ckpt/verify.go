package ckpt

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// VerifyReport describes one iteration of a distributed checkpoint as
// Verify found it. Its JSON form is what `gotron ckpt inspect --json`
// prints under "verify".
type VerifyReport struct {
	// Dir is the iteration's directory, Iteration its number.
	Dir       string `json:"dir"`
	Iteration int    `json:"iteration"`
	// Shards lists every shard file in the manifest's order.
	Shards []ShardReport `json:"shards"`
	// Tensors lists every tensor, sorted by key.
	Tensors []TensorReport `json:"tensors"`
	// Bytes is the sum of the shards' sizes as the manifest records them
	// (at most math.MaxInt64).
	Bytes int64 `json:"bytes"`
	// Blocks is the number of checksum blocks the manifest records (one
	// CRC32C per BlockSize bytes of each piece); Verified those read and
	// found intact; Damaged those whose checksum differs or that could not
	// be read (a missing, short or unreadable shard).
	Blocks   int `json:"blocks"`
	Verified int `json:"verified"`
	Damaged  int `json:"damaged"`
}

// ShardReport is one shard file: its name in the iteration's directory,
// the rank that wrote it, its size in bytes (as recorded; Actual is the
// file's size on disk, -1 if it cannot be read), and its number of pieces
// and checksum blocks.
type ShardReport struct {
	File   string `json:"file"`
	Rank   int    `json:"rank"`
	Bytes  int64  `json:"bytes"`
	Actual int64  `json:"actual_bytes"`
	Pieces int    `json:"pieces"`
	Blocks int    `json:"blocks"`
}

// TensorReport is one tensor: its key ("model/NAME", …), its whole shape
// and the number of pieces (boxes) it is saved in, over all shards.
type TensorReport struct {
	Key    string `json:"key"`
	Shape  []int  `json:"shape"`
	Pieces int    `json:"pieces"`
}

// SizeError reports a shard file whose size differs from the manifest's
// record: a truncated shard (Got < Want) or one with bytes appended.
type SizeError struct {
	File      string
	Got, Want int64
}

func (e *SizeError) Error() string {
	what := "truncated"
	if e.Got > e.Want {
		what = "longer than saved"
	}
	return fmt.Sprintf("%s is damaged: it is %d bytes, the manifest records %d (%s): restore the file or load an earlier iteration", e.File, e.Got, e.Want, what)
}

// ShardError reports a shard file that is missing or not a regular file
// (Cause says which).
type ShardError struct {
	File, Cause string
}

func (e *ShardError) Error() string {
	return fmt.Sprintf("%s is damaged: %s: restore the file or load an earlier iteration", e.File, e.Cause)
}

// MissingError reports checksum blocks of a piece that cannot be read:
// the shard is missing, not a regular file, too short to hold them (Blocks
// of them from block First on), or a read failed (Cause).
type MissingError struct {
	File, Key     string
	Box           Box
	First, Blocks int
	Cause         string
}

func (e *MissingError) Error() string {
	blocks := fmt.Sprintf("block %d", e.First)
	if e.Blocks > 1 {
		blocks = fmt.Sprintf("blocks %d–%d", e.First, e.First+e.Blocks-1)
	}
	return fmt.Sprintf("%s is damaged: tensor %s, piece %s, %s cannot be read (%s): restore the file or load an earlier iteration",
		e.File, e.Key, e.Box, blocks, e.Cause)
}

// Verify reads every piece of every shard completely and checks every
// block's CRC32C, and checks each shard file's size against the manifest.
// It returns the report and, when anything is damaged, every damage
// joined (errors.Join) in the manifest's order: a *ShardError per shard
// file that is missing or not a regular file, a *SizeError per shard of
// the wrong size, a *DamageError per block whose checksum differs, and a
// *MissingError per piece whose blocks cannot be read (a missing or short
// shard). Each names the shard file (its path); the block and piece
// errors also the tensor key and the piece's box. Verify is not fooled by
// a shard with bytes appended (SizeError) although every block verifies.
//
// Verify reads through one BlockSize buffer: it allocates in proportion
// to the manifest, never to the sizes the manifest claims.
func (r *Reader) Verify() (VerifyReport, error) {
	m := r.Manifest
	rep := VerifyReport{Dir: r.Dir, Iteration: m.Iteration}
	pieces := map[string]int{}
	var errs []error
	var buf []byte
	for i := range m.Shards {
		s := &m.Shards[i]
		path := shardPath(r.Dir, s.File)
		sr := ShardReport{File: s.File, Rank: s.Rank, Bytes: s.Size, Actual: -1, Pieces: len(s.Pieces)}
		for _, p := range s.Pieces {
			sr.Blocks += len(p.CRC)
			pieces[p.Key]++
		}
		rep.Bytes = min(rep.Bytes, math.MaxInt64-s.Size) + s.Size // saturated: a damaged manifest may claim anything
		rep.Blocks += sr.Blocks

		// Refuse what is not a regular file before opening it: opening a
		// named pipe would block.
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() {
			cause := "not a regular file"
			switch {
			case errors.Is(err, os.ErrNotExist):
				cause = "the file is missing"
			case err != nil:
				cause = err.Error()
			}
			errs = append(errs, &ShardError{File: path, Cause: cause})
			errs = append(errs, missingShard(s, path, "the shard cannot be read", &rep)...)
			rep.Shards = append(rep.Shards, sr)
			continue
		}
		sr.Actual = st.Size()
		rep.Shards = append(rep.Shards, sr)
		if sr.Actual != s.Size {
			errs = append(errs, &SizeError{File: path, Got: sr.Actual, Want: s.Size})
		}
		// Opened here, not through r.file: a shard of the wrong size is
		// still read, so that every damaged block is listed.
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, missingShard(s, path, err.Error(), &rep)...)
			continue
		}
		if buf == nil {
			buf = make([]byte, BlockSize)
		}
		for j := range s.Pieces {
			errs = append(errs, verifyPiece(f, path, &s.Pieces[j], sr.Actual, buf, &rep)...)
		}
		f.Close()
	}
	keys := make([]string, 0, len(m.Tensors))
	for k := range m.Tensors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rep.Tensors = append(rep.Tensors, TensorReport{Key: k, Shape: m.Tensors[k], Pieces: pieces[k]})
	}
	return rep, errors.Join(errs...)
}

// missingShard reports every piece of shard s (at path) as unreadable
// for cause.
func missingShard(s *Shard, path, cause string, rep *VerifyReport) []error {
	var errs []error
	for _, p := range s.Pieces {
		if len(p.CRC) == 0 {
			continue
		}
		rep.Damaged += len(p.CRC)
		errs = append(errs, &MissingError{File: path, Key: p.Key, Box: p.Box, First: 0, Blocks: len(p.CRC), Cause: cause})
	}
	return errs
}

// verifyPiece reads piece p of the shard f (at path, size bytes on disk)
// block by block into buf (BlockSize bytes) and checks each block's
// CRC32C, counting into rep; it returns a *DamageError per damaged block
// and one *MissingError for the blocks the file is too short to hold.
func verifyPiece(f *os.File, path string, p *Piece, size int64, buf []byte, rep *VerifyReport) []error {
	var errs []error
	total := 4 * int64(p.Numel())
	for k := range p.CRC {
		start := int64(k) * BlockSize
		end := min(total, start+BlockSize)
		if p.Pos+end > size {
			rest := len(p.CRC) - k
			rep.Damaged += rest
			errs = append(errs, &MissingError{File: path, Key: p.Key, Box: p.Box, First: k, Blocks: rest,
				Cause: fmt.Sprintf("they end at byte %d, the file has %d", p.Pos+total, size)})
			return errs
		}
		b := buf[:end-start]
		if _, err := f.ReadAt(b, p.Pos+start); err != nil {
			rest := len(p.CRC) - k
			rep.Damaged += rest
			errs = append(errs, &MissingError{File: path, Key: p.Key, Box: p.Box, First: k, Blocks: rest, Cause: err.Error()})
			return errs
		}
		if got := crc32.Checksum(b, castagnoli); got != p.CRC[k] {
			rep.Damaged++
			errs = append(errs, &DamageError{File: path, Key: p.Key, Box: p.Box, Block: k, Got: got, Want: p.CRC[k]})
			continue
		}
		rep.Verified++
	}
	return errs
}

// shardPath names shard file in the iteration directory dir, uncleaned,
// so that a message about a file the manifest names "." or ".." still
// shows the directory and the name.
func shardPath(dir, file string) string {
	return dir + string(filepath.Separator) + file
}
