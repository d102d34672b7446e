//go:build unix

package ckpt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestVerifyRefusesNamedPipe: a shard replaced by a named pipe is
// reported by Verify and refused by ToWhole without opening it (opening
// a pipe blocks until a writer comes).
func TestVerifyRefusesNamedPipe(t *testing.T) {
	dir := t.TempDir()
	distSave(t, dir, 3)
	p := filepath.Join(IterDir(dir, 3), ShardFile(1))
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan [3]error, 1)
	go func() {
		_, verr := r.Verify()
		_, cerr := ToWhole(r)
		ferr := r.Fill("model/w", Box{Offset: []int{0, 0}, Shape: []int{6, 4}}, make([]float32, 24))
		done <- [3]error{verr, cerr, ferr}
	}()
	select {
	case errs := <-done:
		var se *ShardError
		if !errors.As(errs[0], &se) || !strings.Contains(errs[0].Error(), ShardFile(1)+" is damaged: not a regular file") {
			t.Errorf("Verify: %v", errs[0])
		}
		if errs[1] == nil || !strings.Contains(errs[1].Error(), ShardFile(1)+" is not a regular file") {
			t.Errorf("ToWhole: %v", errs[1])
		}
		if !errors.As(errs[2], &se) || !strings.Contains(errs[2].Error(), ShardFile(1)) {
			t.Errorf("Fill: %v", errs[2])
		}
	case <-time.After(10 * time.Second):
		// Unblock the reader so that the test ends.
		if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Verify, ToWhole or Fill opened the named pipe and blocked")
	}
}
