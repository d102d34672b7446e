package safetensors

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// failAfter is a writer that accepts n bytes and then fails.
type failAfter struct {
	w io.Writer
	n int
}

var errInjected = errors.New("injected write error")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k, _ := f.w.Write(p[:f.n])
		f.n = 0
		return k, errInjected
	}
	f.n -= len(p)
	return f.w.Write(p)
}

// writeOld writes the file the failed writes must leave alone and returns its bytes.
func writeOld(t *testing.T, path string) []byte {
	t.Helper()
	if err := WriteFile(path, []Tensor{F32("old", []int{2}, []float32{3, 4})}, map[string]string{"v": "old"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkIntact checks that path still holds old and that dir holds nothing else.
func checkIntact(t *testing.T, dir, path string, old []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, old) {
		t.Errorf("old file changed: %v", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only %s (temporary file left behind)", names, filepath.Base(path))
	}
}

func TestWriteFileFailureKeepsOldFile(t *testing.T) {
	big := make([]float32, 1<<19) // 2 MiB, more than the write buffer
	newTensors := []Tensor{F32("new", []int{len(big)}, big)}
	for _, n := range []int{0, 5, 100, 1 << 20, 2<<20 - 1} {
		dir := t.TempDir()
		path := filepath.Join(dir, "w.safetensors")
		old := writeOld(t, path)
		hooks := writeHooks{wrap: func(w io.Writer) io.Writer { return &failAfter{w: w, n: n} }}
		err := writeFile(path, newTensors, nil, hooks)
		if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "previous file is untouched") {
			t.Errorf("fail after %d bytes: error %v", n, err)
		}
		checkIntact(t, dir, path, old)
	}
}

func TestWriteFileFailureBeforeRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	old := writeOld(t, path)
	var sawTmp string
	hooks := writeHooks{beforeRename: func(tmp string) error {
		sawTmp = tmp
		if _, err := ReadFile(tmp); err != nil { // the temporary file is complete
			t.Errorf("temporary file: %v", err)
		}
		return errInjected
	}}
	if err := writeFile(path, []Tensor{F32("new", []int{1}, []float32{1})}, nil, hooks); !errors.Is(err, errInjected) {
		t.Errorf("error %v", err)
	}
	if filepath.Dir(sawTmp) != dir {
		t.Errorf("temporary file %s not in %s", sawTmp, dir)
	}
	checkIntact(t, dir, path, old)
}

func TestWriteFileBadDirectory(t *testing.T) {
	dir := t.TempDir()
	err := WriteFile(filepath.Join(dir, "missing", "w.safetensors"), []Tensor{F32("w", []int{1}, []float32{1})}, nil)
	if err == nil || !strings.Contains(err.Error(), "check that the directory exists and is writable") {
		t.Errorf("missing directory: %v", err)
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: permission bits do not stop writes, skipping the read-only directory case")
		return
	}
	path := filepath.Join(dir, "w.safetensors")
	old := writeOld(t, path)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if err := WriteFile(path, []Tensor{F32("w", []int{1}, []float32{1})}, nil); err == nil {
		t.Error("write into a read-only directory succeeded")
	}
	checkIntact(t, dir, path, old)
}

func TestWriteFileKeepsMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	writeOld(t, path)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, want 0644", st.Mode().Perm())
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	writeOld(t, path)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("replaced file mode %v, want 0600 kept", st.Mode().Perm())
	}
	if err := WriteFile(dir, nil, nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("writing over a directory: %v", err)
	}
}
