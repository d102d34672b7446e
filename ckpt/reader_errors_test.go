package ckpt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenErrorsSayWhatThereIs: a missing iteration lists the complete
// ones the directory holds, an iteration without its manifest says so and
// how to go on, and a file given as the directory is named as a file.
func TestOpenErrorsSayWhatThereIs(t *testing.T) {
	dir := t.TempDir()
	for _, it := range []int{2, 6} {
		d := IterDir(dir, it)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ManifestFile), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(IterDir(dir, 4), 0o755); err != nil { // cut off: no manifest
		t.Fatal(err)
	}
	if _, err := OpenIteration(dir, 3); err == nil || !strings.Contains(err.Error(), "no iteration 3") || !strings.Contains(err.Error(), "it holds iteration(s) 2, 6") {
		t.Errorf("a missing iteration: %v", err)
	}
	if _, err := OpenIteration(dir, 4); err == nil || !strings.Contains(err.Error(), "iteration 4 has no metadata.json") || !strings.Contains(err.Error(), "--ckpt-step (it holds iteration(s) 2, 6)") {
		t.Errorf("an iteration without its manifest: %v", err)
	}
	file := filepath.Join(dir, "notes.txt")
	os.WriteFile(file, nil, 0o644)
	if _, err := Latest(file); err == nil || !strings.Contains(err.Error(), "is a file, not a checkpoint directory") {
		t.Errorf("a file: %v", err)
	}
}
