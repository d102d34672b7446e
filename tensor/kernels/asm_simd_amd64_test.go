//go:build goexperiment.simd && amd64

package kernels

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/gotron/gotron/internal/asmcheck"
)

// TestNoLegacySSEWhileDirty reads this test binary's machine code for the
// kernels' functions: no legacy-SSE instruction may write an XMM register
// while the vector registers' upper halves are dirty — in a vector loop it
// stalls every iteration on an Intel Xeon, after vector code once per call
// (package asmcheck). A finding names the function and the instruction;
// the fix is usually an operation the compiler lowers to a VEX instruction
// (a vector operand instead of a scalar count), constants read through a
// pointer instead of a struct copied by value, or ClearAVXUpperBits before
// the scalar code.
func TestNoLegacySSEWhileDirty(t *testing.T) {
	found, err := asmcheck.LegacySSEWhileDirty(os.Args[0], "github.com/gotron/gotron/tensor/kernels.")
	if errors.Is(err, exec.ErrNotFound) {
		t.Skip("objdump (binutils) is not installed: the machine code is not checked")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("legacy SSE with dirty upper halves: %v", f)
	}
}
