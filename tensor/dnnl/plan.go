package dnnl

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/gotron/gotron/tensor/blas"
)

// LargeFLOPs is the work (2·m·n·k) from which a GEMM counts as large: it
// runs on oneDNN over the caller's threads (tensor.GemmParallel), and a
// bfloat16 one follows Plan's Large choice; smaller ones run on one
// thread and follow Plan's Small choice.
const LargeFLOPs = 1 << 21

// Path is how GemmBF16 computes a product of bfloat16 operands.
type Path int

const (
	// Native runs oneDNN's bfloat16 matmul (AVX-512 BF16 or AMX).
	Native Path = iota
	// Widened widens A and B to float32 (exactly) and runs the float32
	// GEMM: the same products, summed in float32 in another order.
	Widened
)

func (p Path) String() string {
	if p == Native {
		return "native"
	}
	return "widened to float32"
}

// BF16Plan is how GemmBF16 computes on this machine, for GEMMs below
// LargeFLOPs (Small) and from it (Large), with the rates that decided it.
type BF16Plan struct {
	Small, Large Path
	// Rates in GFLOP/s on one thread at the probe's shapes, [Native,
	// Widened]; zero when not measured.
	SmallRates, LargeRates [2]float64
	// Source says where the plan came from: measured now, read from the
	// cache file, set by GOTRON_BF16_GEMM, or fixed by the build or CPU.
	Source string
}

// For returns the plan's path for a GEMM of the given work (2·m·n·k): the
// rule GemmBF16 follows, and every caller that must know it asks here.
func (p BF16Plan) For(flops int) Path {
	if flops >= LargeFLOPs {
		return p.Large
	}
	return p.Small
}

// String describes the plan for a start-up line, for example "bf16
// GEMMs native from 2 MFLOP (3.9× the float32 kernels' rate), widened to
// float32 below (0.8× the float32 kernels' rate); measured".
func (p BF16Plan) String() string {
	ratio := func(r [2]float64) string {
		if r[0] == 0 || r[1] == 0 {
			return ""
		}
		return fmt.Sprintf(" (%.1f× the float32 kernels' rate)", r[0]/r[1])
	}
	if p.Small == p.Large && p.SmallRates == [2]float64{} {
		return fmt.Sprintf("bf16 GEMMs %s; %s", p.Small, p.Source)
	}
	return fmt.Sprintf("bf16 GEMMs %s from %d MFLOP%s, %s below%s; %s",
		p.Large, LargeFLOPs>>20, ratio(p.LargeRates), p.Small, ratio(p.SmallRates), p.Source)
}

// nativeMargin is how much faster the native kernel must be than the
// widened one to be chosen: close rates would otherwise flip with the
// machine's noise from one measurement to the next.
const nativeMargin = 1.1

// choose returns the path for measured rates.
func choose(r [2]float64) Path {
	if r[0] >= nativeMargin*r[1] {
		return Native
	}
	return Widened
}

// PlanEnv is the environment variable that overrides the plan: native,
// float32 (widened) or auto (measure; the default).
const PlanEnv = "GOTRON_BF16_GEMM"

// Plan returns how GemmBF16 computes in this process, decided once: by
// GOTRON_BF16_GEMM when set; widened to float32 when oneDNN has no
// bfloat16 kernels on this CPU (or this build has no oneDNN); else from
// the rates of the native and widened kernels at a small (64×64×64 and
// 64×256×64) and a large (512×1024×512) shape, the native path where it
// is at least 1.1× as fast. The rates are measured twice on one thread in
// about 0.2 s; when the two probes agree they are kept in the cache
// directory (GOTRON_CACHE_DIR, default ~/.cache/gotron: bf16-plan-*.json,
// one file per CPU model, features and library versions), so that every
// later run on the machine makes the same choice; when they disagree (a
// busy machine) the run uses the second and keeps nothing. An unusable
// GOTRON_BF16_GEMM is an error naming the values it takes.
//
// Call Plan before the ranks start working (the trainer does), so that
// the measurement is not disturbed by them; GemmBF16 calls it otherwise.
func Plan() (BF16Plan, error) { return plan() }

var plan = sync.OnceValues(func() (BF16Plan, error) {
	return decide(os.Getenv(PlanEnv), Available(), cacheFile(os.Getenv(CacheEnv)), measure)
})

// decide is Plan with its inputs given: the override, whether the native
// kernels exist, the cache file ("" for none) and the measurement.
func decide(env string, native bool, cache string, measure func() ([2]float64, [2]float64)) (BF16Plan, error) {
	switch strings.ToLower(env) {
	case "native":
		if !native {
			return BF16Plan{}, fmt.Errorf("%s=native: this CPU or build has no native bfloat16 GEMM (%s): unset it or use float32", PlanEnv, Version())
		}
		return BF16Plan{Small: Native, Large: Native, Source: PlanEnv + "=native"}, nil
	case "float32", "widened":
		return BF16Plan{Small: Widened, Large: Widened, Source: PlanEnv + "=" + env}, nil
	case "", "auto":
	default:
		return BF16Plan{}, fmt.Errorf("%s=%q: use native, float32 or auto", PlanEnv, env)
	}
	if !native {
		return BF16Plan{Small: Widened, Large: Widened, Source: "no native bfloat16 GEMM on this CPU or build"}, nil
	}
	if p, ok := readPlan(cache); ok {
		return p, nil
	}
	small, large := measure()
	p := BF16Plan{Small: choose(small), Large: choose(large), SmallRates: small, LargeRates: large, Source: "measured"}
	small2, large2 := measure()
	if !steady(small, small2) || !steady(large, large2) {
		// The machine was busy: use this run's plan, keep nothing.
		p.Source = "measured on a busy machine (two probes disagreed), not kept"
		return p, nil
	}
	if cache != "" && writePlan(cache, p) == nil {
		p.Source = "measured, kept in " + cache
	}
	return p, nil
}

// steady reports whether two probes of the same rates agree: the same
// choice, and each rate within 25% of the other's.
func steady(a, b [2]float64) bool {
	near := func(x, y float64) bool { return x <= 1.25*y && y <= 1.25*x }
	return choose(a) == choose(b) && near(a[0], b[0]) && near(a[1], b[1])
}

// cachedPlan is the cache file's content.
type cachedPlan struct {
	Machine    string     `json:"machine"`
	SmallRates [2]float64 `json:"small_gflops_native_widened"`
	LargeRates [2]float64 `json:"large_gflops_native_widened"`
	Measured   string     `json:"measured"`
}

// readPlan returns the plan kept in file, if it is there and well formed.
func readPlan(file string) (BF16Plan, bool) {
	if file == "" {
		return BF16Plan{}, false
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return BF16Plan{}, false
	}
	var c cachedPlan
	if json.Unmarshal(b, &c) != nil || !valid(c.SmallRates) || !valid(c.LargeRates) {
		return BF16Plan{}, false
	}
	if _, err := time.Parse(time.DateOnly, c.Measured); err != nil {
		return BF16Plan{}, false
	}
	return BF16Plan{Small: choose(c.SmallRates), Large: choose(c.LargeRates), SmallRates: c.SmallRates, LargeRates: c.LargeRates,
		Source: "measured " + c.Measured + ", kept in " + file + " (delete it to measure again)"}, true
}

func valid(r [2]float64) bool { return r[0] > 0 && r[1] > 0 && r[0] < 1e7 && r[1] < 1e7 }

// writePlan keeps p's rates in file (atomically: a temporary file renamed).
func writePlan(file string, p BF16Plan) error {
	b, err := json.MarshalIndent(cachedPlan{machine(), p.SmallRates, p.LargeRates, time.Now().UTC().Format(time.DateOnly)}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// machine describes what the rates depend on: the CPU's model and
// features and the libraries' versions and kernels.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	x := cpu.X86
	return fmt.Sprintf("%s; avx512f=%v avx512bf16=%v amx_bf16=%v; %s; %s", model, x.HasAVX512F, x.HasAVX512BF16, x.HasAMXBF16, Version(), blas.Kernel())
}

// CacheEnv is the environment variable naming the directory where gotron
// keeps what it measured of the machine (default: gotron in the user's
// cache directory, ~/.cache/gotron); "off" keeps nothing.
const CacheEnv = "GOTRON_CACHE_DIR"

// cacheFile returns the plan's cache file for this machine in dir (CacheEnv;
// "" for the default), or "" when nothing is to be kept.
func cacheFile(dir string) string {
	switch dir {
	case "off":
		return ""
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(d, "gotron")
	}
	sum := sha256.Sum256([]byte(machine()))
	return filepath.Join(dir, "bf16-plan-"+hex.EncodeToString(sum[:8])+".json")
}

// measure returns the native and widened kernels' rates (GFLOP/s, one
// thread) at the small and the large probe shapes.
func measure() (small, large [2]float64) {
	return probe([][3]int{{64, 64, 64}, {64, 256, 64}}, 40*time.Millisecond),
		probe([][3]int{{512, 1024, 512}}, 60*time.Millisecond)
}

// probe times the native and the widened kernel, interleaved in rounds
// after a warm-up call each, on C = A·Bᵀ at each m×k×n shape, for about
// budget in all, and returns each kernel's rate over the shapes: their
// FLOPs over the sum of each shape's fastest time.
func probe(shapes [][3]int, budget time.Duration) [2]float64 {
	var flops float64
	var total [2]time.Duration
	for _, s := range shapes {
		m, k, n := s[0], s[1], s[2]
		a, b, c := make([]uint16, m*k), make([]uint16, n*k), make([]float32, m*n)
		for i := range a {
			a[i] = 0x3F80 + uint16(i%7) // bfloat16 1 and its neighbours
		}
		for i := range b {
			b[i] = 0x3F80 + uint16(i%5)
		}
		run := func(p Path) time.Duration {
			start := time.Now()
			if err := gemmOn(p, false, true, m, n, k, 1, a, k, b, k, 0, c, n, 1); err != nil {
				return time.Hour
			}
			return time.Since(start)
		}
		run(Native)
		run(Widened)
		var fastest [2]time.Duration
		for end := time.Now().Add(budget / time.Duration(len(shapes))); time.Now().Before(end); {
			for p := range fastest {
				if d := run(Path(p)); fastest[p] == 0 || d < fastest[p] {
					fastest[p] = d
				}
			}
		}
		flops += 2 * float64(m*n*k)
		total[0] += fastest[0]
		total[1] += fastest[1]
	}
	return [2]float64{flops / max(total[0].Seconds(), 1e-9) / 1e9, flops / max(total[1].Seconds(), 1e-9) / 1e9}
}
