package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/train"
)

// gemmShape is one GEMM shape of a benchmark model's iteration.
type gemmShape struct {
	name           string
	m, n, k        int
	transA, transB bool
	count          int // calls per iteration
	// workers is the threads one call runs on: the rank's for a linear
	// layer's GEMM, 1 for the attention core's blocks, whose calls run side
	// by side on the rank's threads.
	workers int
}

func (g gemmShape) flops() float64 { return 2 * float64(g.m) * float64(g.n) * float64(g.k) }

// attention reports whether g is one of the attention core's blocks, which
// run on one thread each and pick their kernel as the attention does.
func (g gemmShape) attention() bool { return g.workers == 1 && strings.HasPrefix(g.name, "attn") }

// gemmShapes lists the GEMMs of one iteration (one micro-batch) of
// configuration c on a rank with threads threads: every linear layer's
// forward (x·Wᵀ), input gradient (dy·W) and weight gradient (dyᵀ·x), the
// output layer's, and the causal attention core's blocks of 64 query rows
// (scores Q·Kᵀ in forward, again in backward's recompute, and dP = dO·Vᵀ;
// P·V and dQ = dS·K; dK = dSᵀ·Q and dV = Pᵀ·dO). A MoE layer's experts
// are not listed: their GEMMs vary with the routing (tensor.GemmVarying).
func gemmShapes(c Config, threads int) []gemmShape {
	m := config.DefaultTransformerConfig()
	c.model(&m)
	T, h, L := c.MicroBatch*c.Seq, c.Hidden, c.Layers
	var out []gemmShape
	linear := func(name string, in, outF, count int) {
		out = append(out,
			gemmShape{name + " forward", T, outF, in, false, true, count, threads},
			gemmShape{name + " dX", T, in, outF, false, false, count, threads},
			gemmShape{name + " dW", outF, in, T, true, false, count, threads})
	}
	linear("qkv", h, m.QKVWidth(), L)
	linear("proj", m.AttentionWidth(), h, L)
	if c.Experts == 0 {
		linear("fc1", h, m.FC1Width(), L)
		linear("fc2", m.FFN(), h, L)
	}
	linear("output", h, c.Vocab, 1)
	d := m.HeadDim()
	heads := c.MicroBatch * c.Heads * L // (batch row, head) pairs of an iteration
	for e := 64; e <= c.Seq; e += 64 {
		out = append(out,
			gemmShape{fmt.Sprintf("attn QKᵀ, dOVᵀ (keys %d)", e), 64, e, d, false, true, 3 * heads, 1},
			gemmShape{fmt.Sprintf("attn PV, dSK (keys %d)", e), 64, d, e, false, false, 2 * heads, 1},
			gemmShape{fmt.Sprintf("attn dSᵀQ, PᵀdO (rows %d)", e), 64, d, e, true, false, 2 * heads, 1})
	}
	return out
}

// Gemm measures, for each configuration of o, every GEMM kernel this
// machine has at each of the model's GEMM shapes (float32, or bfloat16
// with o.BF16), marks the one gotron picks, and prints the GEMM ceiling:
// the model's FLOPs over the time its GEMMs would take at the best
// measured rate for each shape, and at the picked one. A rank's threads
// run a linear layer's GEMM together; the attention's blocks run on one
// thread each, side by side, so their rate counts once per thread.
func Gemm(ctx context.Context, w io.Writer, o Options) error {
	threads := threadsOr(o.Threads)
	for _, name := range o.Configs {
		if _, ok := configs[name]; !ok {
			return fmt.Errorf("--configs: unknown configuration %q (known: small, medium, medium-llama, medium-moe, long)", name)
		}
	}
	if err := train.DecideKernels(o.BF16); err != nil {
		return err
	}
	kernels := tensor.GemmKernels(o.BF16)
	fmt.Fprintf(w, "gotron bench --gemm: one rank, %d thread(s), %s, GEMM %s, %s\n", threads, precision(o), tensor.GemmLibraries(), time.Now().Format("2006-01-02"))
	for _, name := range o.Configs {
		c := configs[name]
		if err := gemmConfig(ctx, w, c, kernels, threads, o.BF16); err != nil {
			return err
		}
	}
	return nil
}

// gemmConfig measures and prints one configuration's table.
func gemmConfig(ctx context.Context, w io.Writer, c Config, kernels []tensor.GemmKernel, threads int, bf16 bool) error {
	fmt.Fprintf(w, "\n%s: %d tokens per iteration; GFLOP/s of each kernel (×%d threads for the attention's one-thread blocks), * = gotron's pick\n", c.Name, c.MicroBatch*c.Seq, threads)
	fmt.Fprintf(w, "%-30s %17s %5s %5s %9s", "GEMM", "m×n×k", "op", "calls", "MFLOP")
	for _, k := range kernels {
		fmt.Fprintf(w, " %14s", k)
	}
	fmt.Fprintln(w)
	shapes := gemmShapes(c, threads)
	if err := warmUp(shapes[0], kernels); err != nil {
		return err
	}
	var best, picked, total float64 // seconds per iteration, FLOPs
	for _, g := range shapes {
		if err := ctx.Err(); err != nil {
			return err
		}
		pick, err := tensor.PickedGemmKernel(bf16, g.attention(), g.m, g.n, g.k)
		if err != nil {
			return err
		}
		row, fastest, pickRate, err := measureShape(g, kernels, pick, threads)
		if err != nil {
			return err
		}
		calls := float64(g.count) * g.flops()
		best += calls / (fastest * 1e9)
		picked += calls / (pickRate * 1e9)
		total += calls
		fmt.Fprintf(w, "%-30s %17s %5s %5d %9.1f%s\n", g.name, fmt.Sprintf("%d×%d×%d", g.m, g.n, g.k), opName(g), g.count, g.flops()/1e6, row)
	}
	tokens := float64(c.MicroBatch * c.Seq)
	model := c.FLOPs(c.MicroBatch * c.Seq)
	fmt.Fprintf(w, "GEMM ceiling of %s: %.1f GFLOP of GEMMs (the model's %.1f GFLOP counts the full attention square); at the best kernel per shape %.0f ms per iteration = %.0f tokens/s (%.1f model GFLOP/s); at gotron's picks %.0f ms = %.0f tokens/s\n",
		c.Name, total/1e9, model/1e9, best*1e3, tokens/best, model/best/1e9, picked*1e3, tokens/picked)
	return nil
}

// measureShape measures each kernel at g, one after another, and returns the
// printed cells, the fastest rate and the picked kernel's (per call site:
// times threads for one-thread GEMMs).
func measureShape(g gemmShape, kernels []tensor.GemmKernel, pick tensor.GemmKernel, threads int) (row string, fastest, picked float64, err error) {
	side := float64(threads / g.workers) // one-thread calls side by side
	budget := 60 * time.Millisecond
	var b strings.Builder
	for _, k := range kernels {
		r, err := tensor.MeasureGemm(k, g.workers, g.transA, g.transB, g.m, g.n, g.k, budget)
		if err != nil {
			return "", 0, 0, fmt.Errorf("%s on %v: %w", g.name, k, err)
		}
		r *= side
		mark := " "
		if k == pick {
			mark, picked = "*", r
		}
		fastest = max(fastest, r)
		fmt.Fprintf(&b, " %13.1f%s", r, mark)
	}
	return b.String(), fastest, picked, nil
}

// warmUp runs every kernel at g for a while, unmeasured: the first
// shape measured ran at a fifth of its rate on the AMX Xeon (oneDNN's
// threads and their tile state, its scratch pages), which a single
// warm-up call does not cover.
func warmUp(g gemmShape, kernels []tensor.GemmKernel) error {
	for _, k := range kernels {
		if _, err := tensor.MeasureGemm(k, g.workers, g.transA, g.transB, g.m, g.n, g.k, 200*time.Millisecond); err != nil {
			return fmt.Errorf("%s on %v: %w", g.name, k, err)
		}
	}
	return nil
}

func opName(g gemmShape) string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return t(g.transA) + t(g.transB)
}
