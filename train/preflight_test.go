package train

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/internal/sysmem"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/plan"
)

// withAvailable makes availableMemory report n bytes under a cgroup v1
// limit for the test.
func withAvailable(t *testing.T, n int64, ok bool) {
	t.Helper()
	old := availableMemory
	limit := sysmem.Limit{Bytes: n, Source: "cgroup v1 memory.limit_in_bytes of /test: 9.0 GiB, 1.0 GiB in use"}
	availableMemory = func() (sysmem.Limit, bool) { return limit, ok }
	t.Cleanup(func() { availableMemory = old })
}

// TestOversizedRunsRefusedUpFront: the reproductions (a huge layer
// count, vocabulary or sequence) end in one error giving the estimate, the
// machine's memory and the flags to change, before any rank allocates.
func TestOversizedRunsRefusedUpFront(t *testing.T) {
	withAvailable(t, 8<<30, true)
	for _, c := range []struct {
		name string
		set  func(*Args)
		want []string
	}{
		{"layers", func(a *Args) { a.Model.NumLayers = 100000 }, []string{"weights about", "--num-layers", "8.0 GiB this machine has available (cgroup v1 memory.limit_in_bytes of /test: 9.0 GiB, 1.0 GiB in use): use"}},
		{"vocabulary", func(a *Args) { a.Model.VocabSize = 100_000_000 }, []string{"--vocab-size", "--bf16"}},
		{"sequence", func(a *Args) { a.Model.SeqLength, a.Model.MaxPositionEmbeddings = 100000, 0 }, []string{"attention scratch about", "--seq-length"}},
		{"absurd width", func(a *Args) { a.Model.HiddenSize, a.Model.NumAttentionHeads = 4_000_000_000, 4 }, []string{"more than 4 EiB"}},
		{"in-process ranks", func(a *Args) { a.Model.NumLayers, a.WorldSize, a.GlobalBatchSize = 12000, 4, 4 },
			[]string{"the 4 ranks on this machine", "--use-distributed-optimizer"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := mockArgs(3)
			c.set(&a)
			_, err := Run(context.Background(), a, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range append(c.want, "invalid arguments: the run needs") {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not mention %q:\n%v", w, msg)
				}
			}
			if !strings.HasPrefix(msg, "invalid arguments: the run needs") || strings.Contains(msg, "\n") {
				t.Errorf("want one line from the checks before training, got:\n%v", msg)
			}
		})
	}
}

// TestMemoryCheckSkippedWithoutAReading: a machine whose available memory
// cannot be read trains unchecked.
func TestMemoryCheckSkippedWithoutAReading(t *testing.T) {
	withAvailable(t, 0, false)
	if _, err := Run(context.Background(), mockArgs(3), Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestEstimateMemoryComponents checks the formula's parts against each
// other: data-parallel copies, the distributed optimizer's shards, 16-bit
// weights, tensor-parallel partitions and the pipeline's micro-batches in
// flight; a save's copy of the state.
func TestEstimateMemoryComponents(t *testing.T) {
	est := func(world int, set func(*Args)) plan.Need {
		a := mockArgs(3)
		a.GlobalBatchSize = 8
		set(&a)
		a = normalise(a, world)
		if err := a.Validate(world); err != nil {
			t.Fatal(err)
		}
		return estimateMemory(a, world, world)
	}
	one := est(1, func(*Args) {})
	p := float64(gpt.NumParameters(mockArgs(3).Model))
	if one.Weights != 4*p || one.Gradients != 4*p || one.Optimizer != 8*p {
		t.Fatalf("one rank: %+v, want 4/4/8 bytes × %g parameters", one, p)
	}
	dp2 := est(2, func(*Args) {})
	if dp2.Weights != 2*one.Weights || dp2.Optimizer != 2*one.Optimizer {
		t.Errorf("two data-parallel ranks hold two copies: %+v vs %+v", dp2, one)
	}
	dist := est(2, func(a *Args) { a.DDP.UseDistributedOptimizer = true })
	if dist.Optimizer != one.Optimizer || dist.Weights != dp2.Weights {
		t.Errorf("the distributed optimizer shards Adam over 2 ranks: %+v", dist)
	}
	bf16 := est(1, func(a *Args) { a.Model.BF16 = true })
	if bf16.Weights != 2*p || bf16.Gradients != 4*p || bf16.Optimizer != 12*p {
		t.Errorf("bf16: %+v, want 2/4/12 bytes per parameter", bf16)
	}
	tp2 := est(2, func(a *Args) { a.Model.TensorModelParallelSize = 2 })
	if tp2.Weights != one.Weights {
		t.Errorf("two tensor-parallel ranks hold one copy: %v vs %v", tp2.Weights, one.Weights)
	}
	pp2 := est(2, func(a *Args) { a.Model.PipelineModelParallelSize = 2 })
	// 1F1B: stage 0 keeps 2 micro-batches of half the layers, stage 1 one.
	if want := one.Activations * 3 / 2; math.Abs(pp2.Activations-want) > 1e-6*want {
		t.Errorf("pipeline of 2: activations %g, want 3/2 of one rank's %g", pp2.Activations, one.Activations)
	}
	// A save copies the weights and moments (12 bytes per parameter on one
	// rank, 4 without the moments), between iterations or, with
	// --async-save, while the next ones run.
	saved := est(1, func(a *Args) { a.Save = t.TempDir() })
	noOpt := est(1, func(a *Args) { a.Save, a.NoSaveOptim = t.TempDir(), true })
	async := est(1, func(a *Args) { a.Save, a.AsyncSave = t.TempDir(), true })
	distSaved := est(2, func(a *Args) { a.Save, a.DDP.UseDistributedOptimizer = t.TempDir(), true })
	base := one.Weights + one.Gradients + one.Optimizer + one.Attention
	if saved.Checkpoint != 12*p || noOpt.Checkpoint != 4*p || distSaved.Checkpoint != 12*p ||
		saved.Total() != base+max(one.Activations, 12*p) || async.Total() != base+one.Activations+12*p {
		t.Errorf("checkpoint copy: %+v, without moments %+v, async %+v, DP 2 distributed %+v", saved, noOpt, async, distSaved)
	}
	if inf := estimateMemory(func() Args { a := mockArgs(3); a.Model.HiddenSize = 1 << 40; return a }(), 1, 1); !math.IsInf(inf.Total(), 1) {
		t.Errorf("an absurd width gives %g, want +Inf", inf.Total())
	}
}

// TestEstimateMemorySplitsExperts: under expert parallelism each rank
// holds E/ep of the routed experts, so four ranks at EP 4 hold the expert
// weights once, and the dense weights four times.
func TestEstimateMemorySplitsExperts(t *testing.T) {
	a := moeArgs(4)
	a.Model.MoELayerFreq = []int{2}
	h := float64(a.Model.HiddenSize)
	experts := 2.0 * 4 * (2*32*h + h*32) // 2 MoE layers of 4 SwiGLU experts of width 32
	dense := float64(gpt.NumParameters(a.Model)) - experts
	for _, ep := range []int{1, 4} {
		b := a
		b.Model.ExpertModelParallelSize = ep
		need := estimateMemory(normalise(b, 4), 4, 4)
		if want := 4 * (4*dense + 4/float64(ep)*experts); need.Weights != want {
			t.Errorf("EP %d: weights %g bytes, want %g", ep, need.Weights, want)
		}
	}
}
