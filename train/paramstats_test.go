package train

import (
	"math"
	"testing"

	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/tensor/rng"
)

// TestLogParamsNorm: --log-params-norm gives the global L2 norm of the
// model's parameters, each counted once. With a learning rate of 0 the
// parameters stay at their initial values, so the norm equals one
// computed directly from a freshly built one-rank model; and TP 2 with
// SP, PP 2 (the tied embedding held twice), DP 2 with the distributed
// optimizer (main parameters sharded) and ZB-V agree with one rank to
// 1e-6 while training.
func TestLogParamsNorm(t *testing.T) {
	a := ppArgs(1, 1, 1)
	a.LR, a.LRWarmupIters, a.TrainIters, a.LogParamsNorm = 0, 0, 2, true
	res := mustRun(t, a)
	m, err := gpt.NewChunk(normalise(a, 1).Model, rng.New(a.Seed), nil, gpt.ChunkSpec{PreProcess: true, PostProcess: true, NumLayers: a.Model.NumLayers})
	if err != nil {
		t.Fatal(err)
	}
	var sq float64
	for _, p := range m.Parameters() {
		if p.Shared {
			continue
		}
		for _, v := range p.Value.Float32().Data() {
			sq += float64(v) * float64(v)
		}
	}
	want := math.Sqrt(sq)
	for i, got := range res.ParamsNorms {
		if math.Abs(got-want) > 1e-9*want {
			t.Errorf("iteration %d at lr 0: params norm %.12g, the model's %.12g", i+1, got, want)
		}
	}

	base := ppArgs(1, 1, 1)
	base.TrainIters, base.LogParamsNorm = 4, true
	ref := mustRun(t, base).ParamsNorms
	for _, l := range []struct {
		name string
		args func() Args
	}{
		{"tp2-sp", func() Args { a := ppArgs(2, 2, 1); a.Model.SequenceParallel = true; return a }},
		{"pp2", func() Args { return ppArgs(2, 1, 2) }},
		{"dp2-distopt", func() Args { a := ppArgs(2, 1, 1); a.DDP.UseDistributedOptimizer = true; return a }},
		{"pp2-zb-v", func() Args {
			a := ppArgs(2, 1, 2)
			a.Model.VirtualPipelineModelParallelSize, a.PipelineSchedule = 2, "zb-v"
			return a
		}},
	} {
		a := l.args()
		a.TrainIters, a.LogParamsNorm = 4, true
		got := mustRun(t, a).ParamsNorms
		for i := range ref {
			if math.Abs(got[i]-ref[i]) > 1e-6*ref[i] {
				t.Errorf("%s, iteration %d: params norm %.9g, one rank %.9g", l.name, i+1, got[i], ref[i])
			}
		}
	}
}

// TestLogNumZerosInGrad: --log-num-zeros-in-grad counts the zero elements
// of the gradients, each counted once: the position-embedding rows past
// the sequence and the vocabulary's padding rows, which no token reaches,
// are zero; the count is one rank's with PP 2 and DP 2 with the
// distributed optimizer, and with TP 2 + SP one rank's plus the rows TP
// adds to the padding (the vocabulary is padded to a multiple of 128·TP).
func TestLogNumZerosInGrad(t *testing.T) {
	count := func(a Args) []float64 {
		a.TrainIters, a.LogNumZerosInGrad = 3, true
		a.Model.MaxPositionEmbeddings = a.Model.SeqLength + 8
		return mustRun(t, a).NumZeros
	}
	one := ppArgs(1, 1, 1)
	ref := count(one)
	h := float64(one.Model.HiddenSize)
	pad := func(a Args) float64 { return float64(a.Model.PaddedVocabSize() - a.Model.VocabSize) }
	for i, n := range ref {
		if want := (8 + pad(one)) * h; n < want {
			t.Errorf("iteration %d: %v zeros, fewer than the unused position and padding rows' %v", i+1, n, want)
		}
	}
	for name, a := range map[string]Args{
		"tp2-sp":      func() Args { a := ppArgs(2, 2, 1); a.Model.SequenceParallel = true; return a }(),
		"pp2":         ppArgs(2, 1, 2),
		"dp2-distopt": func() Args { a := ppArgs(2, 1, 1); a.DDP.UseDistributedOptimizer = true; return a }(),
	} {
		got := count(a)
		extra := (pad(a) - pad(one)) * h
		for i := range ref {
			if got[i] != ref[i]+extra {
				t.Errorf("%s, iteration %d: %v zeros, one rank %v and %v more padding", name, i+1, got[i], ref[i], extra)
			}
		}
	}
}
