package bench

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/gotron/gotron/tensor"
)

// Phase names of a CPU-time breakdown, in the order they print.
var phaseNames = []string{"GEMM", "attention", "other kernels", "optimizer", "communication", "allocation", "runtime and other"}

// Breakdown is where the CPU time of a profiled stretch of training went:
// per phase, the CPU time of the profile's samples (every goroutine and
// cgo thread of the process, so up to cores × wall time).
type Breakdown struct {
	Total time.Duration
	CPU   map[string]time.Duration
}

// String formats the phases as percentages of the total.
func (b Breakdown) String() string {
	if b.Total == 0 {
		return "no samples"
	}
	var parts []string
	for _, n := range phaseNames {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", n, 100*float64(b.CPU[n])/float64(b.Total)))
	}
	return strings.Join(parts, " | ")
}

// phaseOf assigns a sample's call stack (leaf first) to a phase. The
// attention core (nn's attentionFn, its GEMMs included) and the optimizer
// (package optim: Adam, clipping, the gradient norm) are scopes: a frame
// of theirs anywhere in the stack decides. Otherwise the frame nearest the
// leaf that belongs to a phase decides:
//
//   - communication: packages comm, dp and pp/p2p (the collectives'
//     copies and reductions, gradient buckets; waiting costs no CPU; the
//     in-process ranks' own goroutine roots, comm/local's Run, do not
//     count);
//   - GEMM: tensor.Gemm, the BLAS and oneDNN calls;
//   - allocation: the Go allocator and the zeroing of new memory (where
//     first-touch page faults land);
//   - other kernels: package tensor/kernels (layer norm, GELU, the loss's
//     softmax, conversions);
//   - runtime and other: the rest (garbage collection, scheduling, glue).
//
// A thread the Go runtime did not start has no Go frames: its samples are
// runtime._ExternalCode over the library the PC was in, as "[file]"
// frames ("[unknown]" for code outside every mapping, such as oneDNN's
// JIT kernels). OpenMP's threads (libgomp), oneDNN and JIT code are the
// GEMM's extra threads, their spin-wait between GEMMs included; MPI's
// libraries are communication.
func phaseOf(frames []string) string {
	for _, f := range frames {
		switch {
		case strings.Contains(f, "nn.(*attentionFn)"):
			return "attention"
		case strings.Contains(f, "gotron/optim."):
			return "optimizer"
		}
	}
	for _, f := range frames {
		switch {
		case strings.Contains(f, "comm/local.runRank"), strings.Contains(f, "comm/local.(*World).Run"):
			// a rank goroutine's root, not communication
		case strings.Contains(f, "gotron/comm."), strings.Contains(f, "gotron/comm/"), strings.Contains(f, "gotron/dp."), strings.Contains(f, "gotron/pp/p2p."):
			return "communication"
		case strings.Contains(f, "gotron/tensor.Gemm"), strings.Contains(f, "gotron/tensor.gemm"),
			strings.Contains(f, "gotron/tensor/blas."), strings.Contains(f, "gotron/tensor/dnnl."):
			return "GEMM"
		case strings.HasPrefix(f, "runtime.mallocgc"), strings.HasPrefix(f, "runtime.memclrNoHeapPointers"),
			strings.HasPrefix(f, "runtime.makeslice"), strings.HasPrefix(f, "runtime.growslice"):
			return "allocation"
		case strings.Contains(f, "gotron/tensor/kernels."):
			return "other kernels"
		case strings.HasPrefix(f, "[libgomp"), strings.HasPrefix(f, "[libdnnl"), f == "[unknown]":
			return "GEMM"
		case strings.HasPrefix(f, "[libmpi"), strings.HasPrefix(f, "[libopen-"), strings.HasPrefix(f, "[mca_"):
			return "communication"
		}
	}
	return "runtime and other"
}

// breakdownOf classifies the samples of a CPU profile (pprof's encoding).
func breakdownOf(raw []byte) (Breakdown, error) {
	p, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		return Breakdown{}, fmt.Errorf("--breakdown: reading the CPU profile: %w", err)
	}
	ti := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			ti = i
		}
	}
	if ti < 0 {
		return Breakdown{}, fmt.Errorf("--breakdown: the profile has no cpu/nanoseconds samples")
	}
	b := Breakdown{CPU: map[string]time.Duration{}}
	var frames []string
	for _, s := range p.Sample {
		frames = frames[:0]
		for _, loc := range s.Location {
			named := false
			for _, l := range loc.Line {
				if l.Function != nil && l.Function.Name != "" {
					frames = append(frames, l.Function.Name)
					named = true
				}
			}
			if !named {
				frames = append(frames, libraryFrame(loc.Mapping))
			}
		}
		d := time.Duration(s.Value[ti])
		b.CPU[phaseOf(frames)] += d
		b.Total += d
	}
	return b, nil
}

// libraryFrame names a location without symbols by its mapping's file:
// "[libgomp.so.1.0.0]", or "[unknown]" outside every mapping.
func libraryFrame(m *profile.Mapping) string {
	if m == nil || m.File == "" {
		return "[unknown]"
	}
	return "[" + path.Base(m.File) + "]"
}

// cpuProfile is a CPU profile of a stretch of a benchmark, kept in memory
// for its Breakdown, and the wall time of the stretch's GEMMs
// (tensor.TimeGemms).
type cpuProfile struct {
	buf      bytes.Buffer
	done     bool
	phases   Breakdown
	stopGemm func() []tensor.GemmTime
	gemms    []tensor.GemmTime
}

// startProfile starts profiling the process's CPU time and timing its
// GEMMs.
func startProfile() (*cpuProfile, error) {
	p := &cpuProfile{}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return nil, fmt.Errorf("--breakdown: %w", err)
	}
	p.stopGemm, _ = tensor.TimeGemms() // nil: another timer runs; no table
	return p, nil
}

// stop ends the profile (once; a nil profile is a no-op) and classifies
// its samples.
func (p *cpuProfile) stop() error {
	if p == nil || p.done {
		return nil
	}
	pprof.StopCPUProfile()
	if p.stopGemm != nil {
		p.gemms = p.stopGemm()
	}
	p.done = true
	var err error
	p.phases, err = breakdownOf(p.buf.Bytes())
	return err
}

// printGemmTimes prints the table of a configuration's GEMMs in its timed
// iterations (Result.Gemms): each shape's calls and wall time per
// iteration (a MoE expert's shapes change with the routing, so their
// calls need not be whole) and its rate, named after gemmShapes, and
// their share of the step.
func printGemmTimes(w io.Writer, c Config, threads int, r Result) {
	names := map[tensor.GemmShape][]string{}
	for _, g := range gemmShapes(c, threads) {
		s := tensor.GemmShape{M: g.m, N: g.n, K: g.k, TransA: g.transA, TransB: g.transB}
		names[s] = append(names[s], g.name)
	}
	var total time.Duration
	var flops float64
	for _, g := range r.Gemms {
		total += g.Time
		flops += g.GFLOPs() * g.Time.Seconds()
	}
	if total <= 0 || r.GemmIters <= 0 {
		return
	}
	iters := float64(r.GemmIters)
	ms := float64(total.Microseconds()) / 1000 / iters
	fmt.Fprintf(w, "GEMMs of %s (wall time per timed iteration, the attention's blocks not among them): %.1f ms of the %.1f ms step (%.1f%%) at %.1f GFLOP/s; gotron bench --gemm measures each kernel alone at these shapes\n",
		c.Name, ms, r.StepMS, 100*ms/r.StepMS, flops/total.Seconds())
	fmt.Fprintf(w, "%-30s %17s %5s %7s %5s %9s %9s\n", "GEMM", "m×n×k", "op", "threads", "calls", "ms", "GFLOP/s")
	for _, g := range r.Gemms {
		name := strings.Join(names[g.GemmShape], ", ")
		if name == "" {
			name = "(not in --gemm's list)" // a MoE expert's, or a tensor-parallel slice
		}
		op := opName(gemmShape{transA: g.TransA, transB: g.TransB})
		fmt.Fprintf(w, "%-30s %17s %5s %7d %5.4g %9.1f %9.1f\n", name, fmt.Sprintf("%d×%d×%d", g.M, g.N, g.K), op, g.Threads,
			float64(g.Calls)/iters, float64(g.Time.Microseconds())/1000/iters, g.GFLOPs())
	}
}
