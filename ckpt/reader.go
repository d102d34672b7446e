package ckpt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Reader reads the tensors of one saved iteration, box by box, opening
// each shard once.
type Reader struct {
	// Dir is the iteration's directory; Manifest its manifest.
	Dir      string
	Manifest *Manifest
	files    map[string]*os.File
	pieces   map[string][]pieceRef
	buf      []byte // one checksum block, reused by every Fill
}

type pieceRef struct {
	shard *Shard
	piece *Piece
}

// Open reads and verifies the manifest of the latest iteration under dir
// (the tracker's).
func Open(dir string) (*Reader, error) {
	it, err := Latest(dir)
	if err != nil {
		return nil, err
	}
	return OpenIteration(dir, it)
}

// OpenIteration reads and verifies the manifest of iteration it under dir
// (Megatron's --ckpt-step).
func OpenIteration(dir string, it int) (*Reader, error) {
	d := IterDir(dir, it)
	m, err := readManifest(d)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, e := os.Stat(filepath.Join(d, "model.safetensors")); e == nil {
				return nil, fmt.Errorf("%s: iteration %d is in the whole-tensor format: convert it with `gotron ckpt convert --from-whole %s DIR` and load DIR", dir, it, dir)
			}
			if _, e := os.Stat(d); e != nil {
				return nil, fmt.Errorf("%s: no iteration %d (%s): pass an iteration the directory holds%s", dir, it, filepath.Base(d), heldIterations(dir))
			}
			return nil, fmt.Errorf("%s: iteration %d has no %s: its save was cut off, or the directory was copied in part; load another iteration with --ckpt-step%s, or save again",
				dir, it, ManifestFile, heldIterations(dir))
		}
		return nil, fmt.Errorf("%s: iteration %d: %w", dir, it, err)
	}
	if m.Iteration != it {
		return nil, fmt.Errorf("%s: %s records iteration %d, its directory names %d: the checkpoint is damaged", dir, filepath.Join(d, ManifestFile), m.Iteration, it)
	}
	return NewReader(d, m), nil
}

// NewReader returns a reader of the verified manifest m of the iteration
// directory dir.
func NewReader(dir string, m *Manifest) *Reader {
	r := &Reader{Dir: dir, Manifest: m, files: map[string]*os.File{}, pieces: map[string][]pieceRef{}}
	for i := range m.Shards {
		s := &m.Shards[i]
		for j := range s.Pieces {
			p := &s.Pieces[j]
			r.pieces[p.Key] = append(r.pieces[p.Key], pieceRef{shard: s, piece: p})
		}
	}
	return r
}

// Close closes the shards the reader opened.
func (r *Reader) Close() error {
	var errs []error
	for _, f := range r.files {
		errs = append(errs, f.Close())
	}
	r.files = map[string]*os.File{}
	return errors.Join(errs...)
}

// Has reports whether the checkpoint holds the tensor key.
func (r *Reader) Has(key string) bool { _, ok := r.Manifest.Tensors[key]; return ok }

// Fill reads box b of tensor key into dst (b's elements, row-major). Only
// the checksum blocks holding b's elements are read, one at a time, and
// each is verified; memory beyond dst is one block.
func (r *Reader) Fill(key string, b Box, dst []float32) error {
	whole, ok := r.Manifest.Tensors[key]
	if !ok {
		return fmt.Errorf("%s: the checkpoint has no tensor %s", r.Dir, key)
	}
	if len(b.Shape) != len(whole) || len(b.Offset) != len(whole) || len(dst) != b.Numel() {
		return fmt.Errorf("%s: reading %s %s into %d values: the tensor is %v", r.Dir, key, b, len(dst), whole)
	}
	got := 0
	for _, ref := range r.pieces[key] {
		p := ref.piece
		in, ok := p.Box.Intersect(b)
		if !ok {
			continue
		}
		f, err := r.file(ref.shard)
		if err != nil {
			return err
		}
		br := blockReader{f: f, path: filepath.Join(r.Dir, ref.shard.File), p: p, k: -1, buf: &r.buf}
		tmp := make([]float32, in.Numel())
		walkRows(p.Shape, relative(in, p.Box), func(flat, k, n int) {
			if err == nil {
				err = br.read(tmp[k:k+n], flat)
			}
		})
		if err != nil {
			return err
		}
		PasteBox(dst, b.Shape, 0, relative(in, b), tmp)
		got += in.Numel()
	}
	if got != b.Numel() {
		return fmt.Errorf("%s: the checkpoint holds %d of the %d elements of %s %s: it is incomplete", r.Dir, got, b.Numel(), key, b)
	}
	return nil
}

// file opens a shard once. It refuses what is not a regular file before
// opening it (opening a named pipe would block) and a file whose size is
// not the manifest's.
func (r *Reader) file(s *Shard) (*os.File, error) {
	if f, ok := r.files[s.File]; ok {
		return f, nil
	}
	path := filepath.Join(r.Dir, s.File)
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, &ShardError{File: path, Cause: "the file is missing"}
	case err != nil:
		return nil, &ShardError{File: path, Cause: err.Error()}
	case !st.Mode().IsRegular():
		return nil, &ShardError{File: path, Cause: "not a regular file"}
	case st.Size() != s.Size:
		return nil, &SizeError{File: path, Got: st.Size(), Want: s.Size}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &ShardError{File: path, Cause: err.Error()}
	}
	r.files[s.File] = f
	return f, nil
}

// relative returns box in's coordinates within box of.
func relative(in, of Box) Box {
	r := Box{Offset: make([]int, len(in.Offset)), Shape: in.Shape}
	for d := range in.Offset {
		r.Offset[d] = in.Offset[d] - of.Offset[d]
	}
	return r
}

// span returns the flat range [lo, hi) of a tensor of shape that box b's
// elements lie in: from its first element to its last.
func span(shape []int, b Box) (int64, int64) {
	var lo, hi int64
	for d := range shape {
		lo = lo*int64(shape[d]) + int64(b.Offset[d])
		hi = hi*int64(shape[d]) + int64(b.Offset[d]+b.Shape[d]-1)
	}
	return lo, hi + 1
}

// heldIterations is ": it holds iterations 2, 4" for the complete
// iteration directories (with a manifest) under dir, or "".
func heldIterations(dir string) string {
	dirs, _ := filepath.Glob(filepath.Join(dir, "iter_[0-9]*"))
	var its []string
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "iter_"))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, ManifestFile)); err == nil {
			its = append(its, strconv.Itoa(n))
		}
	}
	if len(its) == 0 {
		return ""
	}
	return " (it holds iteration(s) " + strings.Join(its, ", ") + ")"
}
