//go:build goexperiment.simd && amd64

package kernels

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/gotron/gotron/internal/asmcheck"
)

// TestNoLegacySSEInVectorLoops reads this test binary's machine code for
// the kernels' functions: no loop that runs AVX or AVX-512 instructions may
// hold a legacy-SSE instruction writing an XMM register, which on Intel
// Xeons stalls every iteration (package asmcheck). A finding names the
// function and the instruction; the fix is usually an operation the
// compiler lowers to a VEX instruction (a vector operand instead of a
// scalar count) or a value kept out of the loop.
func TestNoLegacySSEInVectorLoops(t *testing.T) {
	found, err := asmcheck.LegacySSEInVectorLoops(os.Args[0], "github.com/gotron/gotron/tensor/kernels.")
	if errors.Is(err, exec.ErrNotFound) {
		t.Skip("objdump (binutils) is not installed: the machine code is not checked")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("legacy SSE in a vector loop: %v", f)
	}
}
