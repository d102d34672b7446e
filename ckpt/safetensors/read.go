package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"unicode/utf8"
)

// maxHeaderLen is the largest header the safetensors project's readers accept
// (MAX_HEADER_SIZE of its Rust crate); anything larger is not a safetensors file.
const maxHeaderLen = 100_000_000

// ReadFile reads and validates the safetensors file at path (see [Read]).
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (mode %v): pass the path of a .safetensors file", path, st.Mode())
	}
	return Read(f, st.Size(), path)
}

// Read reads and validates a safetensors file of size bytes from r; name is used in error
// messages and stored in [File.Name]. The tensors' Data share one buffer holding the data
// section.
//
// The checks, each reported with the numbers involved: the file has the 8-byte header
// length; the header fits in the file and in 100 MB; the header is a JSON object whose
// entries are tensors with a known dtype, a shape and two data_offsets, plus an optional
// "__metadata__" of strings; no name appears twice; no dimension is negative and
// product(shape)·elemsize, computed with overflow checks, fits in an int; end-begin is
// exactly that; no two non-empty tensors share bytes; every tensor lies within the data
// section; r holds size bytes. Only the data section up to the end of the last tensor is
// held in memory; trailing bytes are read and dropped.
func Read(r io.Reader, size int64, name string) (*File, error) {
	if size < 8 {
		return nil, fmt.Errorf("%s: file has %d bytes, fewer than the 8 bytes of the header length: it is truncated or not a safetensors file; re-create it", name, size)
	}
	var lenBuf [8]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("%s: reading the header length: %w", name, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxHeaderLen {
		return nil, fmt.Errorf("%s: header length %d exceeds the format's limit of %d bytes: the file is corrupt or not a safetensors file; re-create it", name, n, maxHeaderLen)
	}
	if n > uint64(size-8) {
		return nil, fmt.Errorf("%s: header length %d is larger than the %d bytes that follow it (file size %d): the file is truncated or not a safetensors file; re-create it", name, n, size-8, size)
	}
	header := make([]byte, n)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, fmt.Errorf("%s: reading the %d-byte header: %w", name, n, err)
	}
	dataLen := size - 8 - int64(n)
	tensors, meta, err := parseHeader(header, name)
	if err != nil {
		return nil, err
	}
	if err := checkLayout(tensors, dataLen, name); err != nil {
		return nil, err
	}
	// Only the bytes the tensors cover are kept; the trailing ones are read and dropped, so
	// memory is bounded by what the header describes and checkLayout found in the file.
	var used int64
	for _, t := range tensors {
		used = max(used, t.end)
	}
	data := make([]byte, used)
	k, err := io.ReadFull(r, data)
	got := int64(k)
	if err == nil {
		var rest int64
		rest, err = io.CopyN(io.Discard, r, dataLen-used)
		got += rest
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the data section should have %d bytes (file size %d) but only %d could be read (%v): the file is truncated; re-create it", name, dataLen, size, got, err)
	}
	f := &File{Name: name, Tensors: make([]Tensor, len(tensors)), Metadata: meta}
	for i, t := range tensors {
		f.Tensors[i] = t.Tensor
		f.Tensors[i].Data = data[t.begin:t.end:t.end]
	}
	return f, nil
}

// headerEntry is one tensor entry of the JSON header; pointers tell a missing field from a
// zero one.
type headerEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// parsedTensor is a tensor of the header with its byte range in the data section.
type parsedTensor struct {
	Tensor
	begin, end int64
}

// parseHeader decodes the JSON header into its tensors, sorted by name and without Data,
// and its metadata.
func parseHeader(header []byte, name string) ([]parsedTensor, map[string]string, error) {
	malformed := func(format string, args ...any) error {
		return fmt.Errorf("%s: malformed JSON header (%d bytes): %s: the file is corrupt or not a safetensors file; re-create it", name, len(header), fmt.Sprintf(format, args...))
	}
	if !utf8.Valid(header) {
		return nil, nil, malformed("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, malformed("%v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, malformed("it starts with %v, not an object", tok)
	}
	var (
		tensors []parsedTensor
		meta    map[string]string
		seen    = map[string]bool{}
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, malformed("%v", err)
		}
		key := tok.(string) // object keys are always strings
		if seen[key] {
			return nil, nil, malformed("the name %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, malformed("value of %q: %v", key, err)
		}
		if key == metadataKey {
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, nil, malformed("%s must be an object of strings: %v", metadataKey, err)
			}
			continue
		}
		t, err := parseEntry(key, raw, name)
		if err != nil {
			return nil, nil, err
		}
		tensors = append(tensors, t)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, malformed("%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, malformed("unexpected content after the closing brace at byte %d", dec.InputOffset())
	}
	sort.Slice(tensors, func(i, j int) bool { return tensors[i].Name < tensors[j].Name })
	return tensors, meta, nil
}
