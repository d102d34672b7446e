package dnnl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMeasure returns fixed rates and counts its calls.
func fakeMeasure(calls *int, small, large [2]float64) func() ([2]float64, [2]float64) {
	return func() ([2]float64, [2]float64) {
		*calls++
		return small, large
	}
}

func TestPlanChoosesByRate(t *testing.T) {
	for _, c := range []struct {
		name         string
		small, large [2]float64
		want         [2]Path // small, large
	}{
		{"AMX: native everywhere", [2]float64{470, 125}, [2]float64{865, 170}, [2]Path{Native, Native}},
		{"AVX-512 BF16 without AMX: widened everywhere", [2]float64{40, 53}, [2]float64{70, 125}, [2]Path{Widened, Widened}},
		{"native only for large GEMMs", [2]float64{40, 53}, [2]float64{300, 125}, [2]Path{Widened, Native}},
		{"within the margin: widened", [2]float64{105, 100}, [2]float64{109, 100}, [2]Path{Widened, Widened}},
	} {
		calls := 0
		p, err := decide("", true, "", fakeMeasure(&calls, c.small, c.large))
		if err != nil || calls != 2 {
			t.Fatalf("%s: decide: %v after %d measurements", c.name, err, calls)
		}
		if got := [2]Path{p.Small, p.Large}; got != c.want {
			t.Errorf("%s: small, large = %v, want %v", c.name, got, c.want)
		}
		if p.For(LargeFLOPs-1) != p.Small || p.For(LargeFLOPs) != p.Large {
			t.Errorf("%s: path() does not split at LargeFLOPs", c.name)
		}
	}
}

func TestPlanOverridesAndRefusals(t *testing.T) {
	calls := 0
	measure := fakeMeasure(&calls, [2]float64{1, 2}, [2]float64{1, 2})
	for _, c := range []struct {
		env    string
		native bool
		want   Path
		err    string
	}{
		{"native", true, Native, ""},
		{"NATIVE", true, Native, ""},
		{"float32", true, Widened, ""},
		{"widened", true, Widened, ""},
		{"native", false, 0, "has no native bfloat16 GEMM"},
		{"fast", true, 0, `GOTRON_BF16_GEMM="fast": use native, float32 or auto`},
		{"auto", false, Widened, ""},
	} {
		p, err := decide(c.env, c.native, "", measure)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s (native %v): error %v, want one containing %q", c.env, c.native, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s (native %v): %v", c.env, c.native, err)
		case c.err == "" && (p.Small != c.want || p.Large != c.want):
			t.Errorf("%s (native %v): plan %+v, want %v everywhere", c.env, c.native, p, c.want)
		}
	}
	if calls != 0 {
		t.Errorf("an override or a CPU without native kernels measured %d times", calls)
	}
}

func TestPlanCache(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gotron", "plan.json")
	calls := 0
	measure := fakeMeasure(&calls, [2]float64{40, 53}, [2]float64{300, 125})
	first, err := decide("", true, file, measure)
	if err != nil {
		t.Fatal(err)
	}
	second, err := decide("", true, file, measure)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("measured %d times, want two probes once (then read from %s)", calls, file)
	}
	if second.Small != first.Small || second.Large != first.Large || second.LargeRates != first.LargeRates {
		t.Errorf("cached plan %+v, measured %+v", second, first)
	}
	if !strings.Contains(second.Source, "kept in "+file) {
		t.Errorf("cached plan's source %q does not name %s", second.Source, file)
	}
	for _, bad := range []string{"", "{", `{"small_gflops_native_widened":[0,1],"large_gflops_native_widened":[1,1]}`, `{"small_gflops_native_widened":[1,"x"]}`,
		`{"small_gflops_native_widened":[2,1],"large_gflops_native_widened":[2,1],"measured":"\u001b[31mred"}`} {
		if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := decide("", true, file, measure); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 12 {
		t.Errorf("damaged cache files were measured again %d times, want 5 × 2 probes", calls-2)
	}
}

func TestPlanString(t *testing.T) {
	p := BF16Plan{Small: Widened, Large: Native, SmallRates: [2]float64{40, 50}, LargeRates: [2]float64{300, 100}, Source: "measured"}
	want := "bf16 GEMMs native from 2 MFLOP (3.0× the float32 kernels' rate), widened to float32 below (0.8× the float32 kernels' rate); measured"
	if got := p.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	p = BF16Plan{Small: Widened, Large: Widened, Source: "GOTRON_BF16_GEMM=float32"}
	if got, want := p.String(), "bf16 GEMMs widened to float32; GOTRON_BF16_GEMM=float32"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestPlanBusyMachine: two probes that disagree (the machine was busy)
// give this run a plan and keep nothing.
func TestPlanBusyMachine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plan.json")
	probes := [][2][2]float64{{{470, 125}, {865, 170}}, {{470, 125}, {206, 11.5}}}
	calls := 0
	measure := func() ([2]float64, [2]float64) {
		r := probes[calls%2]
		calls++
		return r[0], r[1]
	}
	p, err := decide("", true, file, measure)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Source, "not kept") {
		t.Errorf("source %q does not say the plan was not kept", p.Source)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a busy machine's plan was kept in %s (%v)", file, err)
	}
	if cacheFile("off") != "" || !strings.HasPrefix(cacheFile("/x/y"), "/x/y/bf16-plan-") {
		t.Errorf("cacheFile: off gives %q, /x/y gives %q", cacheFile("off"), cacheFile("/x/y"))
	}
}
