//go:build unix

package data

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadWithin runs LoadTextCorpus and fails the test if it has not returned after 10 s, so
// that a regression that opens a named pipe hangs no longer than that.
func loadWithin(t *testing.T, paths []string) (*Corpus, error) {
	t.Helper()
	type result struct {
		c   *Corpus
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := LoadTextCorpus(paths, nil)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("LoadTextCorpus(%v) still running after 10 s", paths)
		return nil, nil
	}
}

// TestLoadTextCorpusRefusesSpecialFiles checks that a named pipe, a socket, a device or a
// symbolic link to one given as a path is refused before it is opened, naming its kind.
func TestLoadTextCorpusRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifo-link")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "gone"), dangling); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cases := []struct {
		path, want string
	}{
		{fifo, "--text-data-path " + fifo + ": a named pipe, not a regular file or directory: pass text files or directories of them"},
		{fifoLink, "--text-data-path " + fifoLink + ": a symbolic link to a named pipe, not a regular file or directory"},
		{sock, "--text-data-path " + sock + ": a socket, not a regular file or directory"},
		{dangling, "--text-data-path " + dangling + ": a symbolic link to " + filepath.Join(dir, "gone") + ", which does not exist: pass an existing file or directory"},
		{"/dev/zero", "--text-data-path /dev/zero: a character device, not a regular file or directory: pass text files or directories of them"},
	}
	for _, c := range cases {
		if _, err := os.Lstat(c.path); err != nil {
			t.Logf("skipping %s: %v", c.path, err)
			continue
		}
		_, err := loadWithin(t, []string{c.path})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v\nwant %q", c.path, err, c.want)
		}
	}
}

// TestLoadTextCorpusSkipsSpecialFilesInDirectories checks that pipes, sockets and symbolic
// links inside a directory are skipped without being opened, while the text is loaded, and
// that a symbolic link to a directory given as a path is followed.
func TestLoadTextCorpusSkipsSpecialFilesInDirectories(t *testing.T) {
	root := writeTree(t, map[string]string{"corpus/a.txt": "hello", "other/b.txt": "linked"})
	dir := filepath.Join(root, "corpus")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "other", "b.txt"), filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.txt")); err != nil {
		t.Fatal(err)
	}
	c, err := loadWithin(t, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := docNames(c); !reflect.DeepEqual(got, []string{"corpus/a.txt"}) {
		t.Errorf("docs %v, want [corpus/a.txt]", got)
	}
	// A link to a directory given as a path is walked, and names use the link's name.
	link := filepath.Join(root, "via-link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	c, err = loadWithin(t, []string{link})
	if err != nil {
		t.Fatal(err)
	}
	if got := docNames(c); !reflect.DeepEqual(got, []string{"via-link/a.txt"}) {
		t.Errorf("docs through a link %v, want [via-link/a.txt]", got)
	}
	// A link to a file given as a path is read, named after the link.
	fileLink := filepath.Join(root, "notes.txt")
	if err := os.Symlink(filepath.Join(root, "other", "b.txt"), fileLink); err != nil {
		t.Fatal(err)
	}
	c, err = loadWithin(t, []string{fileLink})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Docs) != 1 || c.Docs[0].Name != "notes.txt" || string(c.Docs[0].Text) != "linked" {
		t.Errorf("docs through a file link %+v", c.Docs)
	}
}

// TestAddRefusesFileReplacedByPipe checks the second line of defence: a file listed as
// regular but replaced by a named pipe before it is read is refused, not read (which would
// block until a writer came).
func TestAddRefusesFileReplacedByPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "a.txt")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	w := walker{label: "--text-data-path", files: []listed{{path: fifo, name: "a.txt", size: 5}}}
	done := make(chan error, 1)
	go func() { done <- w.read("--text-data-path " + fifo) }()
	select {
	case err := <-done:
		if want := "--text-data-path: " + fifo + " is now a named pipe, not a regular file"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a named pipe listed as a regular file still blocks after 10 s")
	}
}
