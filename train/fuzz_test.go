package train

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzArgs is one input of FuzzValidate: the settings a user most often
// gets wrong, each as the flag gives it.
type fuzzArgs struct {
	NumLayers, HiddenSize, Heads, FFN, Seq, Vocab, MaxPositions int
	Micro, Global, Iters                                        int
	TP, PP, VPP, World                                          int
	LR, MinLR                                                   float64
	HiddenDropout, AttentionDropout                             float32
	AdamEps                                                     float64
	LayernormEps                                                float32
	ClipGrad                                                    float64
	Warmup, DecayIters                                          int
	DecayStyle, Layout                                          string
	BF16, FP16, DistributedOptimizer                            bool
	Threads                                                     int
	TimeoutMinutes                                              float64
}

// defaultFuzzArgs is mockArgs(10) on one rank, as a fuzzArgs.
func defaultFuzzArgs() fuzzArgs {
	a := mockArgs(10)
	m := a.Model
	return fuzzArgs{
		NumLayers: m.NumLayers, HiddenSize: m.HiddenSize, Heads: m.NumAttentionHeads, FFN: m.FFNHiddenSize,
		Seq: m.SeqLength, Vocab: m.VocabSize, MaxPositions: m.MaxPositionEmbeddings,
		Micro: a.MicroBatchSize, Global: a.GlobalBatchSize, Iters: a.TrainIters,
		TP: m.TensorModelParallelSize, PP: m.PipelineModelParallelSize, VPP: m.VirtualPipelineModelParallelSize, World: 1,
		LR: a.LR, MinLR: a.MinLR, HiddenDropout: m.HiddenDropout, AttentionDropout: m.AttentionDropout,
		AdamEps: a.AdamEps, LayernormEps: m.LayernormEpsilon, ClipGrad: a.ClipGrad,
		Warmup: a.LRWarmupIters, DecayIters: a.LRDecayIters, DecayStyle: a.LRDecayStyle, Layout: m.PipelineModelParallelLayout,
		BF16: m.BF16, FP16: m.FP16, DistributedOptimizer: a.DDP.UseDistributedOptimizer,
		Threads: a.Threads, TimeoutMinutes: a.DistributedTimeoutMinutes,
	}
}

// args returns the training arguments of the input (mock data, the other
// settings at their defaults) and the world size: World itself if it lies
// in 1..16, else wrapped into that range.
func (in fuzzArgs) args() (Args, int) {
	world := int(uint(in.World-1)%16) + 1
	a := mockArgs(in.Iters)
	m := &a.Model
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads, m.FFNHiddenSize = in.NumLayers, in.HiddenSize, in.Heads, in.FFN
	m.SeqLength, m.VocabSize, m.MaxPositionEmbeddings = in.Seq, in.Vocab, in.MaxPositions
	m.TensorModelParallelSize, m.PipelineModelParallelSize, m.VirtualPipelineModelParallelSize = in.TP, in.PP, in.VPP
	m.HiddenDropout, m.AttentionDropout, m.LayernormEpsilon = in.HiddenDropout, in.AttentionDropout, in.LayernormEps
	m.PipelineModelParallelLayout = in.Layout
	m.BF16, m.FP16 = in.BF16, in.FP16
	a.MicroBatchSize, a.GlobalBatchSize = in.Micro, in.Global
	a.LR, a.MinLR, a.AdamEps, a.ClipGrad = in.LR, in.MinLR, in.AdamEps, in.ClipGrad
	a.LRWarmupIters, a.LRDecayIters, a.LRDecayStyle = in.Warmup, in.DecayIters, in.DecayStyle
	a.DDP.UseDistributedOptimizer = in.DistributedOptimizer
	a.Threads, a.DistributedTimeoutMinutes = in.Threads, in.TimeoutMinutes
	a.WorldSize = world
	return a, world
}

// add adds in to f's seed corpus, in the order of FuzzValidate's arguments.
func (in fuzzArgs) add(f *testing.F) {
	f.Add(in.NumLayers, in.HiddenSize, in.Heads, in.FFN, in.Seq, in.Vocab, in.MaxPositions,
		in.Micro, in.Global, in.Iters, in.TP, in.PP, in.VPP, in.World,
		in.LR, in.MinLR, in.HiddenDropout, in.AttentionDropout, in.AdamEps, in.LayernormEps, in.ClipGrad,
		in.Warmup, in.DecayIters, in.DecayStyle, in.Layout, in.BF16, in.FP16, in.DistributedOptimizer,
		in.Threads, in.TimeoutMinutes)
}

// multiError is the header of Validate's error with several problems.
var multiError = regexp.MustCompile(`^invalid arguments \(([0-9]+)\):$`)

// caretLine is the line under a layout that points at a character of it.
var caretLine = regexp.MustCompile(`^    ( *)\^$`)

// caretBlock reports whether lines a and b are the two lines that
// config.LayoutError adds under a problem line naming a layout: the layout
// itself, indented by four spaces, and a caret under one of its characters.
func caretBlock(problem, a, b string) bool {
	layout, ok := strings.CutPrefix(a, "    ")
	if !ok || !strings.Contains(problem, "pipeline_model_parallel_layout "+strconv.Quote(layout)+":") {
		return false
	}
	m := caretLine.FindStringSubmatch(b)
	return m != nil && len(m[1]) < utf8.RuneCountInString(layout)
}

// checkValidateError fails unless err is Validate's error in one of its two
// forms: "invalid arguments: ..." on one line, or "invalid arguments (N):"
// followed by N lines "  - ...", N ≥ 2, with no other line breaks. The one
// exception is the layout and caret that a problem with a
// pipeline_model_parallel_layout string ends with (config.LayoutError),
// two lines indented by four spaces.
func checkValidateError(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	var problems []string
	lines := strings.Split(msg, "\n")
	for i := 0; i < len(lines); i++ {
		problems = append(problems, lines[i])
		if i+2 < len(lines) && caretBlock(lines[i], lines[i+1], lines[i+2]) {
			i += 2
		}
	}
	if rest, ok := strings.CutPrefix(problems[0], "invalid arguments: "); ok {
		if len(problems) != 1 || rest == "" {
			t.Fatalf("a single-problem error must be one non-empty line:\n%s", msg)
		}
		return
	}
	sub := multiError.FindStringSubmatch(problems[0])
	if sub == nil {
		t.Fatalf("the error is in neither form %q nor %q:\n%s", "invalid arguments: ...", "invalid arguments (N):\\n  - ...", msg)
	}
	n, _ := strconv.Atoi(sub[1])
	if n < 2 || len(problems)-1 != n {
		t.Fatalf("the header counts %d problems, and %d lines follow it:\n%s", n, len(problems)-1, msg)
	}
	for _, l := range problems[1:] {
		if !strings.HasPrefix(l, "  - ") || len(l) == len("  - ") {
			t.Fatalf("line %q is not a problem of its own (%q): a problem's message spans several lines:\n%s", l, "  - ...", msg)
		}
	}
}

// FuzzValidate builds arguments from fuzzed sizes, batch settings, parallel
// layout, learning-rate schedule, precision and runtime settings, normalises
// them as Run does, and validates them for a world of 1 to 16 ranks.
// Validate must not panic, and its error must be one of its two forms (one
// line, or a counted list of one-line problems). Arguments it accepts must
// give a memory estimate whose every component is non-negative or +Inf,
// never NaN, and at least one microbatch per iteration. Nothing is trained.
func FuzzValidate(f *testing.F) {
	def := defaultFuzzArgs()
	seeds := []func(*fuzzArgs){
		func(*fuzzArgs) {},
		func(in *fuzzArgs) { in.Global = -4 },
		func(in *fuzzArgs) { in.LR = math.NaN() },
		func(in *fuzzArgs) { in.HiddenDropout = float32(math.NaN()) },
		func(in *fuzzArgs) { in.NumLayers = 100000 },
		func(in *fuzzArgs) { in.Vocab = 1e8 },
		func(in *fuzzArgs) { in.Seq = 1e5 },
		func(in *fuzzArgs) { in.Threads = -1 },
		func(in *fuzzArgs) { in.PP, in.Layout = 2, "E|t|" },
		func(in *fuzzArgs) { in.HiddenSize, in.Heads = 1<<40, 1 },
		// Valid larger layouts: pipelined, interleaved, tensor parallel in 16-bit.
		func(in *fuzzArgs) { in.World, in.PP, in.Global = 4, 2, 16 },
		func(in *fuzzArgs) { in.World, in.NumLayers, in.PP, in.Layout, in.Global = 4, 4, 2, "Et|t|t|tL", 16 },
		func(in *fuzzArgs) {
			in.World, in.TP, in.BF16, in.DistributedOptimizer, in.DecayStyle = 8, 2, true, true, "linear"
		},
		// Parallel sizes whose product wraps around: 2³²·2³² is 0 in an int.
		func(in *fuzzArgs) { in.TP, in.PP = 1<<32, 1<<32 },
		// A micro-batch that wraps around when multiplied by the 4 data-parallel ranks.
		func(in *fuzzArgs) { in.World, in.Micro, in.Global = 4, 1<<62, 8 },
		// Line breaks in strings the errors quote; a bad layout letter, which
		// the layout's error points at with a caret under the layout.
		func(in *fuzzArgs) { in.DecayStyle, in.Layout, in.PP = "cos\nine", "E\n|tL", 2 },
		func(in *fuzzArgs) { in.World, in.PP, in.Layout = 2, 2, "Et|xL" },
	}
	for _, s := range seeds {
		in := def
		s(&in)
		in.add(f)
	}
	f.Fuzz(func(t *testing.T, numLayers, hidden, heads, ffn, seq, vocab, maxPos,
		micro, global, iters, tp, pp, vpp, world int,
		lr, minLR float64, hiddenDropout, attentionDropout float32, adamEps float64, lnEps float32, clip float64,
		warmup, decayIters int, style, layout string, bf16, fp16, distOpt bool,
		threads int, timeout float64) {
		in := fuzzArgs{
			NumLayers: numLayers, HiddenSize: hidden, Heads: heads, FFN: ffn, Seq: seq, Vocab: vocab, MaxPositions: maxPos,
			Micro: micro, Global: global, Iters: iters, TP: tp, PP: pp, VPP: vpp, World: world,
			LR: lr, MinLR: minLR, HiddenDropout: hiddenDropout, AttentionDropout: attentionDropout,
			AdamEps: adamEps, LayernormEps: lnEps, ClipGrad: clip, Warmup: warmup, DecayIters: decayIters,
			DecayStyle: style, Layout: layout, BF16: bf16, FP16: fp16, DistributedOptimizer: distOpt,
			Threads: threads, TimeoutMinutes: timeout,
		}
		a, n := in.args()
		a = normalise(a, n)
		if err := a.Validate(n); err != nil {
			checkValidateError(t, err)
			return
		}
		need := estimateMemory(a, n, n)
		for _, c := range []struct {
			name string
			v    float64
		}{
			{"weights", need.Weights}, {"gradients", need.Gradients}, {"optimizer", need.Optimizer},
			{"activations", need.Activations}, {"attention", need.Attention}, {"total", need.Total()},
		} {
			if math.IsNaN(c.v) || c.v < 0 {
				t.Fatalf("valid arguments on %d ranks, %+v: estimated %s memory %g, want ≥ 0 or +Inf", n, in, c.name, c.v)
			}
		}
		if m := a.NumMicroBatches(a.DataParallelSize(n)); m < 1 {
			t.Fatalf("valid arguments on %d ranks, %+v: %d microbatches per iteration (global %d, micro %d, data parallel %d), want ≥ 1",
				n, in, m, a.GlobalBatchSize, a.MicroBatchSize, a.DataParallelSize(n))
		}
	})
}
