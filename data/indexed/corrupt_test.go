package indexed

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// patch rewrites the file at path with f applied to its bytes.
func patch(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The good dataset the corruptions start from: uint16, documents of 2, 0, 1 and 1
// sequences, so S = 4, D = 5; lengths at offset 34, pointers at 50, document indices
// [0 2 2 3 4] at 82, the file ends at 122; the .bin holds 8 tokens, 16 bytes.
var goodDocs = []doc{{[]int32{1, 2, 3}, []int{2, 1}}, {}, {[]int32{4, 5, 6, 7}, nil}, {[]int32{8}, nil}}

func put64(off int, v uint64) func([]byte) []byte {
	return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], v); return b }
}

func put32(off int, v uint32) func([]byte) []byte {
	return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
}

// Each corruption of a good file gives its one-line error, naming the file.
func TestOpenCorrupt(t *testing.T) {
	cases := []struct {
		name     string
		idx, bin func([]byte) []byte
		want     []string // substrings of the error
	}{
		{name: "magic", idx: func(b []byte) []byte { b[0] = 'X'; return b },
			want: []string{`not an indexed dataset index (magic "XMIDIDX\x00\x00", want "MMIDIDX\x00\x00" at offset 0): pass the prefix`}},
		{name: "text", idx: func([]byte) []byte { return []byte("hello") },
			want: []string{`not an indexed dataset index (magic "hello"`}},
		{name: "empty", idx: func([]byte) []byte { return nil },
			want: []string{`truncated index: 0 bytes, the header alone takes 34`}},
		{name: "short header", idx: func(b []byte) []byte { return b[:20] },
			want: []string{`truncated index: 20 bytes, the header alone takes 34`}},
		{name: "version", idx: put64(9, 2), want: []string{"index version 2 at offset 9, want 1"}},
		{name: "dtype 0", idx: func(b []byte) []byte { b[17] = 0; return b },
			want: []string{"unknown token dtype code 0 at offset 17 (known: 1 uint8,"}},
		{name: "dtype 9", idx: func(b []byte) []byte { b[17] = 9; return b },
			want: []string{"unknown token dtype code 9 at offset 17"}},
		{name: "no document indices", idx: put64(26, 0),
			want: []string{"document index count 0 at offset 26"}},
		{name: "truncated", idx: func(b []byte) []byte { return b[:len(b)-4] },
			want: []string{"truncated index: 4 sequences (offset 18) and 5 document indices (offset 26) need the file to end at offset 122, it ends at offset 118"}},
		{name: "more sequences", idx: put64(18, 5),
			want: []string{"truncated index: 5 sequences", "end at offset 134, it ends at offset 122"}},
		{name: "huge counts", idx: put64(26, 1<<62),
			want: []string{"truncated index: 4 sequences (offset 18) and 4611686018427387904 document indices (offset 26) need the file to end at offset more than 2^63"}},
		{name: "trailing", idx: func(b []byte) []byte { return append(b, 1, 2, 3) },
			want: []string{"3 trailing bytes after the document indices, from offset 122 to 125"}},
		{name: "multimodal", idx: func(b []byte) []byte { return append(b, 0, 1, 0, 1) },
			want: []string{"4 bytes after the document indices (offset 122), one per sequence: a multimodal index with sequence modes, which gotron does not read"}},
		{name: "negative length", idx: put32(38, 0xffffffff),
			want: []string{"sequence 1 has negative length -1 (offset 38)"}},
		{name: "first pointer", idx: put64(50, 2),
			want: []string{"sequence 0 starts at byte 2 of", "(pointer at offset 50), want 0"}},
		{name: "pointer", idx: put64(66, 8),
			want: []string{"sequence 2 starts at byte 8 of", "(pointer at offset 66), want 6 = sequence 1's pointer 4 + its length 1 × 2 bytes"}},
		{name: "length", idx: put32(34, 3),
			want: []string{"sequence 1 starts at byte 4", "want 6 = sequence 0's pointer 0 + its length 3 × 2 bytes"}},
		{name: "dtype size", idx: func(b []byte) []byte { b[17] = byte(Int32); return b },
			want: []string{"sequence 1 starts at byte 4", "want 8 = sequence 0's pointer 0 + its length 2 × 4 bytes"}},
		{name: "bin long", bin: func(b []byte) []byte { return append(b, 0, 0) },
			want: []string{".bin holds 18 bytes, the index describes 16 (8 tokens × 2 bytes of uint16)"}},
		{name: "bin short", bin: func(b []byte) []byte { return b[:14] },
			want: []string{"sequence 3 ends at byte 16, beyond the end of", ".bin (14 bytes)"}},
		{name: "bin empty", bin: func([]byte) []byte { return nil },
			want: []string{"sequence 0 ends at byte 4, beyond the end of", ".bin (0 bytes)"}},
		{name: "first document", idx: put64(82, 1),
			want: []string{"the first document index is 1 (offset 82), want 0"}},
		{name: "decreasing", idx: put64(98, 1),
			want: []string{"document index 2 is 1 (offset 98), less than document index 1 (2)"}},
		{name: "beyond", idx: put64(106, 9),
			want: []string{"document index 3 is 9 (offset 106), beyond the 4 sequences"}},
		{name: "last", idx: put64(114, 3),
			want: []string{"the last document index is 3 (offset 114), want the sequence count 4: sequences [3, 4) belong to no document"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := tmpPrefix(t, "x_text_document")
			writeDocs(t, prefix, Uint16, goodDocs)
			if c.idx != nil {
				patch(t, prefix+".idx", c.idx)
			}
			if c.bin != nil {
				patch(t, prefix+".bin", c.bin)
			}
			ds, err := Open(prefix)
			if err == nil {
				ds.Close()
				t.Fatal("Open succeeded")
			}
			checkErr(t, err, prefix+".idx: ", c.want...)
		})
	}
}

// checkErr requires err to be one line starting with start and holding every want.
func checkErr(t *testing.T, err error, start string, want ...string) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, start) {
		t.Errorf("error %q: want one line starting with %q", msg, start)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q\nwant it to contain %q", msg, w)
		}
	}
}

// The good file itself opens (so every failure above is the corruption's).
func TestOpenGood(t *testing.T) {
	prefix := tmpPrefix(t, "x_text_document")
	writeDocs(t, prefix, Uint16, goodDocs)
	if st, err := os.Stat(prefix + ".idx"); err != nil || st.Size() != 122 {
		t.Fatalf("the good index: %v, %d bytes, want 122", err, st.Size())
	}
	checkDataset(t, openT(t, prefix), Uint16, goodDocs)
}

// Missing files: which one, and what --data-path takes.
func TestOpenMissing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x_text_document")
	writeDocs(t, p, Uint16, goodDocs)
	onlyBin := filepath.Join(dir, "b")
	onlyIdx := filepath.Join(dir, "i")
	copyFile(t, p+".bin", onlyBin+".bin")
	copyFile(t, p+".idx", onlyIdx+".idx")
	if err := os.Mkdir(filepath.Join(dir, "d.idx"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, p+".bin", filepath.Join(dir, "d.bin"))
	cases := []struct {
		prefix, start string
		want          []string
	}{
		{onlyBin, onlyBin + ".idx: ", []string{"no such file (" + onlyBin + ".bin exists)", "PREFIX.idx and PREFIX.bin pair"}},
		{onlyIdx, onlyIdx + ".bin: ", []string{"no such file (" + onlyIdx + ".idx exists)"}},
		{filepath.Join(dir, "none"), filepath.Join(dir, "none.idx") + " and ", []string{"none.bin: no such files: --data-path takes the prefix of an indexed dataset without extension"}},
		{p + ".bin", p + ".bin.idx: ", []string{`no such file: --data-path takes the prefix without extension; pass "` + p + `"`}},
		{p + ".idx", p + ".idx.idx: ", []string{`pass "` + p + `"`}},
		{dir, dir + ": ", []string{"a directory, not the prefix of an indexed dataset", "DIR/NAME_text_document"}},
		{filepath.Join(dir, "d"), filepath.Join(dir, "d.idx") + ": ", []string{"a directory, not a file"}},
	}
	for _, c := range cases {
		ds, err := Open(c.prefix)
		if err == nil {
			ds.Close()
			t.Errorf("Open(%q) succeeded", c.prefix)
			continue
		}
		checkErr(t, err, c.start, c.want...)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
