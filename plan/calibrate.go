package plan

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/internal/sysmem"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// Calibrate measures this machine as a Hardware description for gotron's
// own runs, a device being a core (a rank per core, as gotron runs its
// in-process ranks): the GEMM rate of one core on gotron's kernels at a
// large and a small shape, from which the peak (at efficiency 1) and the
// half-efficiency dimension follow; bfloat16's the same way where oneDNN
// runs it; the rate at which one core moves activations through gotron's
// own element-wise kernels (kernelBandwidth), the description's memory
// bandwidth at efficiency 1; an in-process
// all-reduce's bus bandwidth and per-step latency over every core. The
// memory a device has is the machine's available memory over its cores.
// docs/PLAN.md says how the description compares with measured runs.
func Calibrate(ctx context.Context, name string) (Hardware, error) {
	cores := runtime.NumCPU()
	hw := Hardware{Name: name, PeakTFLOPS: map[string]float64{}, DevicesPerNode: cores, ActivationBytes: 4,
		Efficiency: Efficiency{GEMM: 1, Memory: 1, Collective: 1}}
	peak, half, err := calibrateGemm(false)
	if err != nil {
		return Hardware{}, err
	}
	hw.PeakTFLOPS["fp32"], hw.Efficiency.GEMMHalfDim = peak, half
	if bf, _, err := calibrateGemm(true); err == nil {
		hw.PeakTFLOPS["bf16"] = bf
	}
	hw.MemoryBandwidthGBs = kernelBandwidth()
	if l, ok := sysmem.Available(); ok {
		hw.MemoryGiB = float64(l.Bytes) / (1 << 30) / float64(cores)
	}
	link, err := allReduceLink(ctx, cores)
	if err != nil {
		return Hardware{}, err
	}
	hw.IntraNode, hw.InterNode = link, link
	host, _ := os.Hostname()
	hw.Description = fmt.Sprintf("%s: %d cores of %s, measured by gotron plan --calibrate on %s; a device is a core",
		host, cores, cpuModel(), time.Now().UTC().Format("2006-01-02"))
	hw.Caveat = "measured on one machine; a device is one core, as gotron's in-process ranks share the machine's cores"
	return hw, hw.check()
}

// calibrateGemm measures gotron's kernel on one core at a large GEMM
// (2048×1536×512, the medium model's linear_qkv) and a small one
// (64×64×64, an attention block) and fits rate = peak·d/(d + d½) to both
// (d the smallest dimension): the peak in 10¹² FLOP/s and d½.
func calibrateGemm(bf16 bool) (peak, half float64, err error) {
	rate := func(m, n, k int) (float64, error) {
		kernel, err := tensor.PickedGemmKernel(bf16, false, m, n, k)
		if err != nil {
			return 0, err
		}
		return tensor.MeasureGemm(kernel, 1, false, false, m, n, k, 300*time.Millisecond)
	}
	big, err := rate(2048, 1536, 512)
	if err != nil {
		return 0, 0, err
	}
	small, err := rate(64, 64, 64)
	if err != nil {
		return 0, 0, err
	}
	peak, half = fitGemm(big, 512, small, 64)
	return peak / 1e3, half, nil
}

// fitGemm fits rate = P·d/(d + d½) to two rates (GFLOP/s) at smallest
// dimensions dBig > dSmall: P in GFLOP/s and d½. A small rate at or above
// the big one gives d½ = 0 (no size effect); one so low no d½ explains
// it, d½ = 10⁶.
func fitGemm(big, dBig, small, dSmall float64) (peak, half float64) {
	q := small / big
	switch {
	case q >= 1:
		return big, 0
	case q*dBig <= dSmall:
		half = 1e6
	default:
		// big·(dBig + h)/dBig = small·(dSmall + h)/dSmall
		half = dBig * dSmall * (1 - q) / (q*dBig - dSmall)
	}
	return big * (dBig + half) / dBig, half
}

// kernelBandwidth is the rate, in GB/s of float32 operands read and
// written, at which one core runs gotron's own element-wise kernels on an
// activation of 8192×512: a layer norm forward (x in, y out) and backward
// (dy and x in, dx out) and a GELU (x in, y out), each the best of three,
// their bytes over their times.
func kernelBandwidth() float64 {
	const rows, cols = 8192, 512
	n := rows * cols
	x, y, dy, dx := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], dy[i] = float32(i%97)/97, float32(i%89)/89
	}
	w, b, dw, db := make([]float32, cols), make([]float32, cols), make([]float32, cols), make([]float32, cols)
	for i := range w {
		w[i] = 1
	}
	mean, rstd := make([]float32, rows), make([]float32, rows)
	best := func(f func()) float64 {
		f() // fault the pages in
		var t time.Duration
		for range 3 {
			start := time.Now()
			f()
			if d := time.Since(start); t == 0 || d < t {
				t = d
			}
		}
		return t.Seconds()
	}
	secs := best(func() { kernels.LayerNormForward(y, mean, rstd, x, w, b, rows, cols, 1e-5) }) +
		best(func() { kernels.LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w, rows, cols) }) +
		best(func() { kernels.GeluForward(y, x) })
	return float64(4*n*(2+3+2)) / secs / 1e9
}

// allReduceLink is an in-process all-reduce's bus bandwidth over n ranks
// (of 16 MiB, busbw = 2(n−1)/n·S/time) and its latency per ring step (of
// one float).
func allReduceLink(ctx context.Context, n int) (Link, error) {
	if n < 2 {
		return Link{BusBandwidthGBs: 1e3, LatencyUS: 1}, nil
	}
	var big, small time.Duration
	err := local.NewWorld(n, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
		time1 := func(elems, reps int) (time.Duration, error) {
			buf := make([]float32, elems)
			best := time.Duration(0)
			for range reps {
				if err := g.Barrier(ctx); err != nil {
					return 0, err
				}
				start := time.Now()
				if err := g.AllReduce(ctx, comm.F32(buf), comm.Sum); err != nil {
					return 0, err
				}
				if d := time.Since(start); best == 0 || d < best {
					best = d
				}
			}
			return best, nil
		}
		b, err := time1(4<<20, 5)
		if err != nil {
			return err
		}
		s, err := time1(1, 50)
		if g.Rank() == 0 {
			big, small = b, s
		}
		return err
	})
	if err != nil {
		return Link{}, err
	}
	steps := 2 * float64(n-1)
	return Link{BusBandwidthGBs: steps / float64(n) * 16 * (1 << 20) / big.Seconds() / 1e9, LatencyUS: small.Seconds() * 1e6 / steps}, nil
}

// cpuModel is /proc/cpuinfo's model name, or "an unknown CPU".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "an unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "an unknown CPU"
}
