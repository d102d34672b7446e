package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"unicode/utf8"
)

// Write encodes tensors and metadata as a safetensors file to w: the tensors sorted by
// name and packed in that order, the header padded with spaces to a multiple of 8 bytes.
// metadata may be nil. Nothing is written if the tensors are invalid (a name used twice,
// empty or not UTF-8, the reserved name "__metadata__", an unknown dtype, or Data whose
// length is not product(Shape)·ElemSize).
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	sorted, header, err := encodeHeader(tensors, metadata)
	if err != nil {
		return err
	}
	return writeParts(w, header, sorted)
}

// WriteFile writes tensors and metadata as a safetensors file at path (see [Write]),
// atomically: the bytes go to a temporary file in the same directory, which is synced,
// given the mode of the file it replaces (0644 for a new file) and renamed over path; the
// directory is then synced so that the rename survives a crash. On any failure before the
// rename the previous file at path is untouched and the temporary file removed. A failure
// of the final directory sync is returned although the new file is already in place.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	return writeFile(path, tensors, metadata, writeHooks{})
}

// writeHooks lets tests inject failures into writeFile.
type writeHooks struct {
	// wrap, if set, wraps the writer of the temporary file.
	wrap func(io.Writer) io.Writer
	// beforeRename, if set, runs once the temporary file is complete and closed; its
	// error aborts the write.
	beforeRename func(tmp string) error
}

func writeFile(path string, tensors []Tensor, metadata map[string]string, hooks writeHooks) (err error) {
	sorted, header, err := encodeHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s: exists and is not a regular file (mode %v): choose another path", path, st.Mode())
		}
		mode = st.Mode().Perm()
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("%s: creating a temporary file in %s: %w: check that the directory exists and is writable", path, dir, err)
	}
	tmpName := tmp.Name()
	defer func() {
		if err != nil {
			tmp.Close() // may already be closed; the error is the earlier one
			os.Remove(tmpName)
		}
	}()
	var w io.Writer = tmp
	if hooks.wrap != nil {
		w = hooks.wrap(w)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := writeParts(bw, header, sorted); err != nil {
		return fmt.Errorf("%s: writing %s: %w: check free space; the previous file is untouched", path, tmpName, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%s: writing %s: %w: check free space; the previous file is untouched", path, tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("%s: syncing %s: %w; the previous file is untouched", path, tmpName, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("%s: setting mode %v on %s: %w; the previous file is untouched", path, mode, tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: closing %s: %w; the previous file is untouched", path, tmpName, err)
	}
	if hooks.beforeRename != nil {
		if err := hooks.beforeRename(tmpName); err != nil {
			return fmt.Errorf("%s: %w; the previous file is untouched", path, err)
		}
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("%s: %w; the previous file is untouched", path, err)
	}
	if err := syncDir(dir); err != nil {
		// The new file is in place; only its durability across a crash is in doubt.
		return fmt.Errorf("%s: written, but syncing directory %s failed: %w", path, dir, err)
	}
	return nil
}

// writeParts writes the header length, the header and the tensors' data.
func writeParts(w io.Writer, header []byte, sorted []Tensor) error {
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	for _, t := range sorted {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// syncDir flushes the directory entry of a rename to stable storage. Filesystems that do
// not support syncing a directory (EINVAL) are accepted.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// encodeHeader validates the tensors and returns them sorted by name together with the
// JSON header: "__metadata__" first (if any, keys sorted), then one entry per tensor in
// name order with consecutive data_offsets, padded with spaces to a multiple of 8 bytes.
func encodeHeader(tensors []Tensor, metadata map[string]string) ([]Tensor, []byte, error) {
	sorted := append([]Tensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i, t := range sorted {
		switch {
		case t.Name == "" || !utf8.ValidString(t.Name):
			return nil, nil, fmt.Errorf("tensor name %q is empty or not valid UTF-8: give every tensor a name", t.Name)
		case t.Name == metadataKey:
			return nil, nil, fmt.Errorf("tensor name %q is reserved for the metadata: rename the tensor", t.Name)
		case i > 0 && sorted[i-1].Name == t.Name:
			return nil, nil, fmt.Errorf("tensor name %q is used twice: names must be unique", t.Name)
		case !t.DType.Valid():
			return nil, nil, fmt.Errorf("tensor %s has dtype %q, which is not a safetensors dtype (known: %s)", t.Name, t.DType, knownDTypes)
		}
		size := t.DType.ElemSize()
		numel, nbytes, err := shapeSize(t.Shape, size)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %s of dtype %s has shape %v: %v: fix the shape", t.Name, t.DType, t.Shape, err)
		}
		if nbytes != int64(len(t.Data)) {
			return nil, nil, fmt.Errorf("tensor %s of dtype %s and shape %v needs %d·%d bytes but Data has %d: the shape and the data disagree", t.Name, t.DType, t.Shape, numel, size, len(t.Data))
		}
	}
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(metadata[k]) {
				return nil, nil, fmt.Errorf("metadata %q: keys and values must be valid UTF-8", k)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(jsonString(metadataKey) + ":{")
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(k) + ":" + jsonString(metadata[k]))
		}
		b.WriteByte('}')
	}
	var off int64
	for i, t := range sorted {
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(t.Name) + `:{"dtype":` + jsonString(string(t.DType)) + `,"shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		end := off + int64(len(t.Data))
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return sorted, b.Bytes(), nil
}

// jsonString returns s as a JSON string literal, without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
