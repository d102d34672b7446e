package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Document is one file of a text corpus.
type Document struct {
	// Name identifies the document independently of where the corpus lies on disk: the
	// file's path relative to the directory given, prefixed with that directory's base
	// name and slash-separated ("books/a/b.txt"), or the base name of a file given
	// directly. The train/valid split hashes it.
	Name string
	// Text is the file's content.
	Text []byte
}

// Corpus is a list of text documents in a deterministic order: the paths in the order
// given, each directory's files in lexical order.
type Corpus struct {
	// Source says where the documents came from, for logs.
	Source string
	Docs   []Document
	// Skipped lists the files that were not loaded because they contain a NUL byte (binary
	// files), by the path on disk.
	Skipped []string
}

// NumBytes returns the total length of the documents' texts.
func (c *Corpus) NumBytes() int64 {
	var n int64
	for _, d := range c.Docs {
		n += int64(len(d.Text))
	}
	return n
}

// Stream returns the corpus as one token stream of bytes: every document's text followed
// by EndOfDocument (byte 0). Its length is NumBytes() + len(Docs).
func (c *Corpus) Stream() []byte {
	out := make([]byte, 0, c.NumBytes()+int64(len(c.Docs)))
	for _, d := range c.Docs {
		out = append(out, d.Text...)
		out = append(out, byte(EndOfDocument))
	}
	return out
}

// LoadTextCorpus loads the text files under paths. Each path is a file, loaded whatever its
// extension, or a directory walked recursively, loading its regular files whose extension
// is in exts ("go" and ".go" both match *.go; empty exts matches every file) and skipping
// directories whose name starts with a dot. A symbolic link given as a path is followed;
// symbolic links and other files that are not regular (pipes, devices, sockets) inside
// directories are skipped. Files containing a NUL byte are binary: they are listed in
// Skipped, not loaded.
//
// Every path is checked and every file listed before any is read. The errors name the flag
// the paths come from, --text-data-path: a path that does not exist; a path that is neither a
// regular file nor a directory (a named pipe or a device such as /dev/zero, which would
// block or never end); files that together need more memory than is available
// (MemAvailable of /proc/meminfo, or the room under the cgroup's limit, when readable); and
// a corpus with no text (no file, or only empty ones).
func LoadTextCorpus(paths []string, exts []string) (*Corpus, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("--text-data-path: no path given: pass at least one file or directory")
	}
	w := walker{label: "--text-data-path", exts: normaliseExts(exts), fix: "pass fewer or smaller files or directories to --text-data-path"}
	for _, p := range paths {
		if err := w.load(p); err != nil {
			return nil, err
		}
	}
	source := "--text-data-path " + strings.Join(paths, ",")
	if err := w.read(source); err != nil {
		return nil, err
	}
	c := &Corpus{Source: source, Docs: w.docs, Skipped: w.skipped}
	if c.NumBytes() == 0 {
		return nil, fmt.Errorf("%s: no text found (0 bytes in %d files%s): pass files or directories that contain text files (%s)",
			source, len(c.Docs)+len(c.Skipped), skippedNote(len(c.Skipped)), w.extsNote())
	}
	return c, nil
}

// skippedNote says how many files were skipped as binary, if any.
func skippedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d of them skipped as binary because they contain NUL bytes", n)
}

// walker collects the documents of a corpus: load lists the files of each path, read
// checks their total size against the available memory and reads them.
type walker struct {
	label    string   // how errors name the paths: the flag they come from
	exts     []string // with a leading dot; empty matches everything
	skipDirs []string // directory names not entered besides hidden ones
	fix      string   // what to do when the files do not fit in memory
	files    []listed
	docs     []Document
	skipped  []string
}

// listed is a regular file found by walker.load, to be read as the document name.
type listed struct {
	path, name string
	size       int64 // when listed
}

// normaliseExts returns exts with a leading dot each.
func normaliseExts(exts []string) []string {
	out := make([]string, 0, len(exts))
	for _, e := range exts {
		if e != "" && !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		out = append(out, e)
	}
	return out
}

// extsNote describes the extensions searched, for error messages.
func (w *walker) extsNote() string {
	if len(w.exts) == 0 {
		return "all files are read"
	}
	return "extensions searched: " + strings.Join(w.exts, ", ")
}

// matches reports whether a file name has one of the extensions.
func (w *walker) matches(name string) bool {
	if len(w.exts) == 0 {
		return true
	}
	ext := filepath.Ext(name)
	for _, e := range w.exts {
		if ext == e {
			return true
		}
	}
	return false
}

// load lists the regular file or the directory tree at p, following p if it is a
// symbolic link. Anything else is refused before it is opened: reading a named pipe blocks
// until a writer comes, and a device such as /dev/zero never ends.
func (w *walker) load(p string) error {
	lst, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s %s: no such file or directory: pass an existing file or directory", w.label, p)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.label, p, err)
	}
	st, link := lst, ""
	if lst.Mode()&fs.ModeSymlink != 0 {
		link = "a symbolic link to "
		if st, err = os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			target, _ := os.Readlink(p)
			return fmt.Errorf("%s %s: a symbolic link to %s, which does not exist: pass an existing file or directory", w.label, p, target)
		} else if err != nil {
			return fmt.Errorf("%s %s: %w", w.label, p, err)
		}
	}
	switch {
	case st.Mode().IsRegular():
		w.files = append(w.files, listed{path: p, name: filepath.Base(p), size: st.Size()})
		return nil
	case !st.IsDir():
		return fmt.Errorf("%s %s: %s%s, not a regular file or directory: pass text files or directories of them", w.label, p, link, fileKind(st.Mode()))
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.label, p, err)
	}
	prefix := filepath.Base(abs)
	root := p
	if link != "" {
		// WalkDir does not follow a root that is a symbolic link.
		if root, err = filepath.EvalSymlinks(p); err != nil {
			return fmt.Errorf("%s %s: %w", w.label, p, err)
		}
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s %s: reading %s: %w", w.label, p, path, err)
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || slices.Contains(w.skipDirs, d.Name())) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !w.matches(d.Name()) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("%s %s: reading %s: %w", w.label, p, path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", w.label, p, err)
		}
		w.files = append(w.files, listed{path: path, name: prefix + "/" + filepath.ToSlash(rel), size: info.Size()})
		return nil
	})
}
