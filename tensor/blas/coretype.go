package blas

import (
	"fmt"
	"strings"

	"golang.org/x/sys/cpu"
)

// Features are the CPU's instruction-set extensions that decide which of
// OpenBLAS's kernels runs fastest on it.
type Features struct {
	AMD                                   bool // the vendor is AMD
	AVX512BF16                            bool
	AVX512F, AVX512VL, AVX512BW, AVX512DQ bool
	AVX512CD                              bool
	AVX2, FMA, AVX, SSE42                 bool
}

// cpuFeatures reads this CPU's Features (CPUID, through x/sys/cpu).
func cpuFeatures() Features {
	x := cpu.X86
	return Features{
		AVX512BF16: x.HasAVX512BF16,
		AVX512F:    x.HasAVX512F, AVX512VL: x.HasAVX512VL, AVX512BW: x.HasAVX512BW, AVX512DQ: x.HasAVX512DQ,
		AVX512CD: x.HasAVX512CD,
		AVX2:     x.HasAVX2, FMA: x.HasFMA, AVX: x.HasAVX, SSE42: x.HasSSE42,
	}
}

// CoreTypeFor returns the OpenBLAS kernel (an OPENBLAS_CORETYPE name of
// OpenBLAS 0.3.21's DYNAMIC_ARCH build) for a CPU with features f, chosen
// by what the CPU can execute, not by its model number: OpenBLAS's own
// choice reads the model from a table, and a CPU it does not know (a new
// Xeon, or one a hypervisor reports with another model number) falls back
// to the generic Prescott kernel, about 6× slower. The empty string means
// no better choice than OpenBLAS's own.
//
//   - AVX-512 F, VL, BW, DQ and CD with AVX-512 BF16: Cooperlake
//     (SkylakeX's float32 kernels and bfloat16 ones);
//   - AVX-512 F, VL, BW, DQ and CD: SkylakeX;
//   - AVX2 and FMA: Haswell, on AMD too (Zen's float32 kernels are
//     Haswell's, and measured no faster: tools/torchref/bench.py);
//   - AVX: Sandybridge; SSE4.2: Nehalem.
func CoreTypeFor(f Features) string {
	avx512 := f.AVX512F && f.AVX512VL && f.AVX512BW && f.AVX512DQ && f.AVX512CD
	switch {
	case avx512 && f.AVX512BF16:
		return "Cooperlake"
	case avx512:
		return "SkylakeX"
	case f.AVX2 && f.FMA:
		return "Haswell"
	case f.AVX:
		return "Sandybridge"
	case f.SSE42:
		return "Nehalem"
	}
	return ""
}

// loaded is how the BLAS library was loaded.
type loaded struct {
	err    string // why OpenBLAS could not be loaded ("": it was)
	pinned bool   // OPENBLAS_CORETYPE was set before gotron started
	env    string // its value then
	chose  string // the core type gotron set ("": none)
	core   string // the kernel OpenBLAS reports
}

// describe names the library, its kernel and who chose it.
func (l loaded) describe() string {
	switch {
	case l.err != "":
		return fmt.Sprintf("gonum (pure Go, several times slower: OpenBLAS could not be loaded: %s; install Debian's libopenblas0)", l.err)
	case l.pinned && !strings.EqualFold(l.core, l.env):
		return fmt.Sprintf("OpenBLAS %s (its own choice: it does not know OPENBLAS_CORETYPE=%s)", l.core, l.env)
	case l.pinned:
		return fmt.Sprintf("OpenBLAS %s (OPENBLAS_CORETYPE=%s)", l.core, l.env)
	case l.chose == "":
		return fmt.Sprintf("OpenBLAS %s (its own choice)", l.core)
	}
	return fmt.Sprintf("OpenBLAS %s (chosen by gotron from the CPU's features)", l.core)
}
