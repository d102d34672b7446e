package blas

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestCoreTypeFor(t *testing.T) {
	avx512 := Features{AVX512F: true, AVX512VL: true, AVX512BW: true, AVX512DQ: true, AVX512CD: true, AVX2: true, FMA: true, AVX: true, SSE42: true}
	bf16 := avx512
	bf16.AVX512BF16 = true
	partial := avx512
	partial.AVX512BW = false // AVX-512 F without BW (Knights Landing): not SkylakeX
	avx2 := Features{AVX2: true, FMA: true, AVX: true, SSE42: true}
	for _, c := range []struct {
		name string
		f    Features
		want string
	}{
		{"AVX-512 BF16 (Cooper Lake, Sapphire Rapids)", bf16, "Cooperlake"},
		{"AVX-512 (Skylake-SP, Ice Lake)", avx512, "SkylakeX"},
		{"AVX-512 F without BW", partial, "Haswell"},
		{"AVX2 and FMA", avx2, "Haswell"},
		{"AVX2 without FMA", Features{AVX2: true, AVX: true, SSE42: true}, "Sandybridge"},
		{"AVX", Features{AVX: true, SSE42: true}, "Sandybridge"},
		{"SSE4.2", Features{SSE42: true}, "Nehalem"},
		{"nothing known", Features{}, ""},
	} {
		if got := CoreTypeFor(c.f); got != c.want {
			t.Errorf("%s: CoreTypeFor = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestKernelFromFeatures runs this test binary again without
// OPENBLAS_CORETYPE (the environment may pin it) and checks that OpenBLAS
// runs the kernel CoreTypeFor chose for this CPU, and that a pinned value
// is left alone.
func TestKernelFromFeatures(t *testing.T) {
	if os.Getenv("GOTRON_BLAS_KERNEL_CHILD") != "" {
		os.Stdout.WriteString("kernel: " + Kernel() + "\n")
		return
	}
	if strings.HasPrefix(Kernel(), "gonum") {
		t.Skip("this build runs gonum's BLAS: " + Kernel())
	}
	run := func(env ...string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKernelFromFeatures$")
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "OPENBLAS_CORETYPE=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		cmd.Env = append(cmd.Env, append(env, "GOTRON_BLAS_KERNEL_CHILD=1")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		_, k, ok := strings.Cut(string(out), "kernel: ")
		if !ok {
			t.Fatalf("no kernel line in\n%s", out)
		}
		k, _, _ = strings.Cut(k, "\n")
		return k
	}
	if want := CoreTypeFor(cpuFeatures()); want != "" {
		if got := run(); got != "OpenBLAS "+want+" (chosen by gotron from the CPU's features)" {
			t.Errorf("unpinned: Kernel() = %q, want OpenBLAS %s chosen from the features", got, want)
		}
	}
	if got := run("OPENBLAS_CORETYPE=Nehalem"); got != "OpenBLAS Nehalem (OPENBLAS_CORETYPE=Nehalem)" {
		t.Errorf("pinned: Kernel() = %q, want OpenBLAS Nehalem as pinned", got)
	}
}

func TestDescribeNamesTheChoice(t *testing.T) {
	for _, c := range []struct {
		l    loaded
		want string
	}{
		{loaded{core: "SkylakeX", chose: "SkylakeX"}, "OpenBLAS SkylakeX (chosen by gotron from the CPU's features)"},
		{loaded{core: "Haswell", pinned: true, env: "Haswell"}, "OpenBLAS Haswell (OPENBLAS_CORETYPE=Haswell)"},
		{loaded{core: "Prescott"}, "OpenBLAS Prescott (its own choice)"},
		{loaded{core: "Cooperlake", pinned: true, env: "Bogus"}, "OpenBLAS Cooperlake (its own choice: it does not know OPENBLAS_CORETYPE=Bogus)"},
		{loaded{core: "SkylakeX", pinned: true, env: "skylakex"}, "OpenBLAS SkylakeX (OPENBLAS_CORETYPE=skylakex)"},
		{loaded{err: "libopenblas.so.0: cannot open shared object file"}, "gonum (pure Go, several times slower: OpenBLAS could not be loaded: libopenblas.so.0: cannot open shared object file; install Debian's libopenblas0)"},
	} {
		if got := c.l.describe(); got != c.want {
			t.Errorf("describe() = %q, want %q", got, c.want)
		}
	}
}
