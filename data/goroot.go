package data

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// GoRootCorpus returns the default corpus: the Go source files (*.go) of the Go
// distribution's standard library and tools, under $GOROOT/src, read from disk at run time
// (never copied into gotron). GOROOT is what `go env GOROOT` prints, or, if the go command
// cannot be run, the GOROOT this binary was built with. Directories named testdata and
// hidden directories are skipped. Document names are "src/<path below src>", the same on
// every machine with the same Go release, so the train/valid split is too.
func GoRootCorpus() (*Corpus, error) {
	root, how := goRoot()
	if root == "" {
		return nil, fmt.Errorf("default corpus: cannot find the Go source tree (%s): install Go so that `go env GOROOT` works, or pass --text-data-path", how)
	}
	src := filepath.Join(root, "src")
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("default corpus: GOROOT %s (%s) has no src directory: install the Go sources, or pass --text-data-path", root, how)
	}
	w := walker{label: "default corpus", exts: []string{".go"}, skipDirs: []string{"testdata"},
		fix: "free memory, or pass a smaller corpus with --text-data-path"}
	if err := w.load(src); err != nil {
		return nil, err
	}
	source := "Go sources in " + src
	if err := w.read("default corpus " + src); err != nil {
		return nil, err
	}
	c := &Corpus{Source: source, Docs: w.docs, Skipped: w.skipped}
	if c.NumBytes() == 0 {
		return nil, fmt.Errorf("default corpus: no Go source found under %s (%s): install the Go sources, or pass --text-data-path", src, how)
	}
	return c, nil
}

// goRoot finds GOROOT and says how, for error messages.
func goRoot() (root, how string) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err == nil {
		if r := strings.TrimSpace(string(out)); r != "" {
			return r, "from `go env GOROOT`"
		}
	}
	if r := runtime.GOROOT(); r != "" {
		return r, fmt.Sprintf("`go env GOROOT` failed (%v); using the GOROOT gotron was built with", err)
	}
	return "", fmt.Sprintf("`go env GOROOT` failed (%v) and gotron was built without a GOROOT", err)
}
