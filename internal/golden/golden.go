// Package golden compares test output with golden files under testdata/,
// re-recorded only with the test flag -update (then review the diff like
// code).
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update re-records the golden files instead of comparing with them.
var update = flag.Bool("update", false, "re-record the golden files under testdata/")

// Updating reports whether the test run re-records golden files.
func Updating() bool { return *update }

// Check compares got with the golden file at path, or with -update writes
// got there (creating its directory). A missing or different file is a
// test error that says how to re-record it.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with go test -update in this package)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (if the change is intended, re-record with go test -update and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
