package kernels

import "fmt"

// The kernels check their arguments' lengths once per call and panic on a mismatch: a wrong
// length is a programmer bug, and the message names the kernel, the argument, and the
// arithmetic it was checked against.

// needLen panics unless len(s) == want.
func needLen(op, arg string, got, want int, how string) {
	if got != want {
		panic(fmt.Sprintf("kernels.%s: len(%s) = %d, want %s = %d", op, arg, got, how, want))
	}
}

// needShape panics if rows or cols is negative or their product overflows int.
func needShape(op string, rows, cols int) {
	if rows < 0 || cols < 0 || (cols != 0 && rows > int(^uint(0)>>1)/cols) {
		panic(fmt.Sprintf("kernels.%s: invalid shape rows = %d, cols = %d (both must be ≥ 0)", op, rows, cols))
	}
}
