package data

import (
	"bytes"
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
// directories whose name starts with a dot. Symbolic links inside directories are not
// followed. Files containing a NUL byte are binary: they are listed in Skipped, not loaded.
//
// The errors name the flag the paths come from, --data-path: a path that does not exist,
// and a corpus with no text (no file, or only empty ones).
func LoadTextCorpus(paths []string, exts []string) (*Corpus, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("--data-path: no path given: pass at least one file or directory")
	}
	w := walker{label: "--data-path", exts: normaliseExts(exts)}
	for _, p := range paths {
		if err := w.load(p); err != nil {
			return nil, err
		}
	}
	c := &Corpus{Source: "--data-path " + strings.Join(paths, ","), Docs: w.docs, Skipped: w.skipped}
	if c.NumBytes() == 0 {
		return nil, fmt.Errorf("--data-path %s: no text found (0 bytes in %d files%s): pass files or directories that contain text files (%s)",
			strings.Join(paths, ","), len(c.Docs)+len(c.Skipped), skippedNote(len(c.Skipped)), w.extsNote())
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

// walker collects the documents of a corpus.
type walker struct {
	label    string   // how errors name the paths: the flag they come from
	exts     []string // with a leading dot; empty matches everything
	skipDirs []string // directory names not entered besides hidden ones
	docs     []Document
	skipped  []string
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

// load adds the file or directory tree at p.
func (w *walker) load(p string) error {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s %s: no such file or directory: pass an existing file or directory", w.label, p)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.label, p, err)
	}
	if !st.IsDir() {
		return w.add(p, filepath.Base(p))
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.label, p, err)
	}
	prefix := filepath.Base(abs)
	return filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s %s: reading %s: %w", w.label, p, path, err)
		}
		if d.IsDir() {
			if path != p && (strings.HasPrefix(d.Name(), ".") || slices.Contains(w.skipDirs, d.Name())) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !w.matches(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(p, path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", w.label, p, err)
		}
		return w.add(path, prefix+"/"+filepath.ToSlash(rel))
	})
}

// add loads the file at path as the document name, or lists it as skipped if binary.
func (w *walker) add(path, name string) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", w.label, path, err)
	}
	if bytes.IndexByte(text, byte(EndOfDocument)) >= 0 {
		w.skipped = append(w.skipped, path)
		return nil
	}
	w.docs = append(w.docs, Document{Name: name, Text: text})
	return nil
}
