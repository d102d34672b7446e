package tp

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// ckRows and ckHidden size the test region: activations [s·b, h] = [6, 8].
const (
	ckRows   = 6
	ckHidden = 8
)

// ckModel is a small region and everything it draws from: two linear
// layers, a layer norm, GELU, dropout from the tracker's model-parallel
// stream (through Get and through Fork) and from the default generator.
type ckModel struct {
	w1, b1, lnw, lnb, w2 *autograd.Var
	tr                   *RNGStatesTracker
	def                  *rng.RNG
	counts               *ckCounts
}

// ckCounts counts the forward and backward runs of ckCountFn, and the
// forwards that were recorded on the tape under test.
type ckCounts struct {
	tape                         *autograd.Tape
	forward, recorded, backwards int
}

// ckCountFn is the identity; it counts its runs.
type ckCountFn struct{ n *ckCounts }

func (f ckCountFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	f.n.forward++
	if c.Recording() && c.Tape() == f.n.tape {
		f.n.recorded++
	}
	return in[0].Clone(), nil
}

func (f ckCountFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	f.n.backwards++
	return []*tensor.Tensor{dy}, nil
}

// newCkModel builds the region's parameters from seed (the same values on
// every call) and the streams of ModelParallelManualSeed(seed, tpRank, 0, 0).
func newCkModel(t *testing.T, seed uint64, tpRank int) *ckModel {
	t.Helper()
	m, err := newCkModelErr(seed, tpRank)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newCkModelErr is newCkModel for rank goroutines, which must not call
// t.Fatal.
func newCkModelErr(seed uint64, tpRank int) (*ckModel, error) {
	tr, def, err := ModelParallelManualSeed(seed, tpRank, 0, 0)
	if err != nil {
		return nil, err
	}
	p := func(name string, v *tensor.Tensor) *autograd.Var { return nn.NewParameter(name, v).Var }
	ones := tensor.Full(1, ckHidden)
	return &ckModel{
		w1:     p("w1", randn(seed+1, 0.3, ckHidden, ckHidden)),
		b1:     p("b1", randn(seed+2, 0.1, ckHidden)),
		lnw:    p("lnw", ones),
		lnb:    p("lnb", randn(seed+3, 0.1, ckHidden)),
		w2:     p("w2", randn(seed+4, 0.3, ckHidden, ckHidden)),
		tr:     tr,
		def:    def,
		counts: &ckCounts{},
	}, nil
}

func (m *ckModel) params() []*autograd.Var { return []*autograd.Var{m.w1, m.b1, m.lnw, m.lnb, m.w2} }

func (m *ckModel) opts() CheckpointOptions {
	return CheckpointOptions{Tracker: m.tr, Default: m.def}
}

// first is linear → GELU → dropout(model-parallel stream, through Get) →
// + z → count.
func (m *ckModel) first(t *autograd.Tape, args []*autograd.Var) (*autograd.Var, error) {
	g, err := m.tr.Get(ModelParallelRNG)
	if err != nil {
		return nil, err
	}
	h := nn.Linear(t, args[0], m.w1, m.b1)
	h = nn.GELU(t, h)
	h = nn.Dropout(t, h, 0.3, g)
	h = autograd.Add(t, h, args[1])
	return autograd.Apply(t, ckCountFn{m.counts}, h), nil
}

// second is layer norm → dropout(model-parallel stream, through Fork) →
// linear → dropout(default generator).
func (m *ckModel) second(t *autograd.Tape, args []*autograd.Var) (*autograd.Var, error) {
	h := nn.LayerNorm(t, args[0], m.lnw, m.lnb, 1e-5)
	if err := m.tr.Fork(ModelParallelRNG, func(g *rng.RNG) error {
		h = nn.Dropout(t, h, 0.25, g)
		return nil
	}); err != nil {
		return nil, err
	}
	h = nn.Linear(t, h, m.w2, nil)
	return nn.Dropout(t, h, 0.2, m.def), nil
}

// region is first then second.
func (m *ckModel) region(t *autograd.Tape, args []*autograd.Var) (*autograd.Var, error) {
	h, err := m.first(t, args)
	if err != nil {
		return nil, err
	}
	return m.second(t, []*autograd.Var{h})
}

// ckResult is what a run produces: the loss, the gradients of the inputs
// and parameters, and the generators' states at the end.
type ckResult struct {
	loss   float32
	grads  map[string][]float32
	states map[string]rng.State
}

// ckRun makes inputs x and z (non-leaf, requiring grad, as activations
// are), runs body on them, reduces its output to a weighted-sum loss and
// runs backward. It returns the result and the activation bytes the tape
// held after body's forward.
func ckRun(t *testing.T, tape *autograd.Tape, m *ckModel, seed uint64,
	body func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var) (ckResult, int64) {
	t.Helper()
	r, held, err := ckRunErr(tape, m, seed, body)
	if err != nil {
		t.Fatal(err)
	}
	return r, held
}

// ckRunErr is ckRun for rank goroutines.
func ckRunErr(tape *autograd.Tape, m *ckModel, seed uint64,
	body func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var) (ckResult, int64, error) {
	m.counts.tape = tape
	x0 := autograd.NewLeaf(randn(seed+10, 1, ckRows, ckHidden), "x", true)
	z0 := autograd.NewLeaf(randn(seed+11, 1, ckRows, ckHidden), "z", true)
	x, z := autograd.Scale(tape, x0, 1), autograd.Scale(tape, z0, 1)
	before := tape.ActivationBytes()
	out := body(tape, x, z)
	held := tape.ActivationBytes() - before
	for _, p := range m.params() {
		if p.Grad != nil {
			return ckResult{}, 0, fmt.Errorf("parameter %s has a gradient after forward", p.Name)
		}
	}
	// A draw after the region: the recompute in backward must put the
	// streams back where this left them.
	out = nn.Dropout(tape, out, 0.1, m.def)
	loss := autograd.WeightedSum(tape, out, randn(seed+12, 1, ckRows, ckHidden))
	if err := autograd.Backward(tape, loss, nil); err != nil {
		return ckResult{}, 0, err
	}
	if b := tape.ActivationBytes(); b != 0 {
		return ckResult{}, 0, fmt.Errorf("after backward the tape still holds %d bytes", b)
	}
	r := ckResult{loss: loss.Value.Data()[0], grads: map[string][]float32{}, states: m.tr.GetStates()}
	r.states["default"] = m.def.State()
	for _, v := range append([]*autograd.Var{x0, z0}, m.params()...) {
		if v.Grad == nil {
			return ckResult{}, 0, fmt.Errorf("%s has no gradient", v.Name)
		}
		r.grads[v.Name] = v.Grad.Data()
	}
	return r, held, nil
}

// ckSame fails unless two runs agree bitwise.
func ckSame(t *testing.T, what string, got, want ckResult) {
	t.Helper()
	numtest.SameBits(t, what+": loss", []float32{got.loss}, []float32{want.loss})
	for name, g := range want.grads {
		numtest.SameBits(t, what+": grad "+name, got.grads[name], g)
	}
	for name, s := range want.states {
		if got.states[name] != s {
			t.Fatalf("%s: rng state %s after backward differs", what, name)
		}
	}
}

// ckDiffers reports whether any gradient of the two runs differs.
func ckDiffers(a, b ckResult) bool {
	for name, g := range b.grads {
		for i := range g {
			if math.Float32bits(a.grads[name][i]) != math.Float32bits(g[i]) {
				return true
			}
		}
	}
	return false
}

func ckPlain(m *ckModel) func(*autograd.Tape, *autograd.Var, *autograd.Var) *autograd.Var {
	return func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var {
		out, err := m.region(tape, []*autograd.Var{x, z})
		if err != nil {
			tape.Fail(err)
		}
		return out
	}
}

func ckBytes(n int) int64 { return 4 * int64(n) }

// TestCheckpointMatchesPlain: losses, input and parameter gradients and
// the final RNG states of a checkpointed region equal bitwise those of the
// same region run plainly, with dropout drawn from a tracker stream (via
// Get and Fork) and from the default generator.
func TestCheckpointMatchesPlain(t *testing.T) {
	const seed = 100
	tape := autograd.NewTape(context.Background())
	mp := newCkModel(t, seed, 0)
	start := mp.tr.GetStates()
	want, plainHeld := ckRun(t, tape, mp, seed, ckPlain(mp))
	if mp.tr.GetStates()[ModelParallelRNG] == start[ModelParallelRNG] || mp.def.State() == rng.New(seed).State() {
		t.Fatal("the region drew nothing: dropout is not exercised")
	}
	if mp.counts.forward != 1 || mp.counts.recorded != 1 || mp.counts.backwards != 1 {
		t.Fatalf("plain counts %+v", *mp.counts)
	}

	tape = autograd.NewTape(context.Background())
	mc := newCkModel(t, seed, 0)
	got, held := ckRun(t, tape, mc, seed, func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var {
		return Checkpoint(tape, mc.region, mc.opts(), x, z)
	})
	ckSame(t, "checkpoint", got, want)
	// Forward kept only x and z; nothing inside the region was recorded
	// on the tape; the recompute ran it once more, recorded, and its
	// backward once.
	if held != ckBytes(2*ckRows*ckHidden) || held >= plainHeld {
		t.Fatalf("checkpointed forward held %d bytes (plain %d), want the two inputs' %d", held, plainHeld, ckBytes(2*ckRows*ckHidden))
	}
	if c := *mc.counts; c.forward != 2 || c.recorded != 1 || c.backwards != 1 {
		t.Fatalf("checkpoint counts %+v, want 2 forwards (1 recorded: the recompute) and 1 backward", c)
	}

	// Control: without the generators, the recompute draws new masks and
	// the gradients differ, so the comparison above can fail.
	tape = autograd.NewTape(context.Background())
	mn := newCkModel(t, seed, 0)
	bad, _ := ckRun(t, tape, mn, seed, func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var {
		return Checkpoint(tape, mn.region, CheckpointOptions{}, x, z)
	})
	if !ckDiffers(bad, want) {
		t.Fatal("a checkpoint that does not replay the RNG gave the same gradients")
	}
}

// TestCheckpointNested checkpoints the second half of the region inside a
// checkpoint of the whole.
func TestCheckpointNested(t *testing.T) {
	const seed = 200
	mp := newCkModel(t, seed, 1)
	want, _ := ckRun(t, autograd.NewTape(context.Background()), mp, seed, ckPlain(mp))
	mc := newCkModel(t, seed, 1)
	got, _ := ckRun(t, autograd.NewTape(context.Background()), mc, seed, func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var {
		outer := func(tape *autograd.Tape, args []*autograd.Var) (*autograd.Var, error) {
			h, err := mc.first(tape, args)
			if err != nil {
				return nil, err
			}
			return Checkpoint(tape, mc.second, mc.opts(), h), nil
		}
		return Checkpoint(tape, outer, mc.opts(), x, z)
	})
	ckSame(t, "nested checkpoint", got, want)
}

// TestCheckpointInputsWithoutGrad: parameters inside the region get their
// gradients even when no argument requires grad.
func TestCheckpointInputsWithoutGrad(t *testing.T) {
	const seed = 300
	run := func(m *ckModel, ckpt bool) map[string][]float32 {
		tape := autograd.NewTape(context.Background())
		x := autograd.Const(randn(seed+10, 1, ckRows, ckHidden))
		z := autograd.Const(randn(seed+11, 1, ckRows, ckHidden))
		var out *autograd.Var
		if ckpt {
			out = Checkpoint(tape, m.region, m.opts(), x, z)
		} else {
			out = ckPlain(m)(tape, x, z)
		}
		if err := autograd.Backward(tape, autograd.Sum(tape, out), nil); err != nil {
			t.Fatal(err)
		}
		g := map[string][]float32{}
		for _, p := range m.params() {
			if p.Grad == nil {
				t.Fatalf("checkpoint %v: %s has no gradient", ckpt, p.Name)
			}
			g[p.Name] = p.Grad.Data()
		}
		return g
	}
	want, got := run(newCkModel(t, seed, 0), false), run(newCkModel(t, seed, 0), true)
	for name := range want {
		numtest.SameBits(t, "grad "+name, got[name], want[name])
	}
}

// TestCheckpointEvaluation: on a tape that is not recording, Checkpoint is
// fn itself (dropout off), and nothing is kept.
func TestCheckpointEvaluation(t *testing.T) {
	const seed = 400
	x := autograd.Const(randn(seed, 1, ckRows, ckHidden))
	z := autograd.Const(randn(seed+1, 1, ckRows, ckHidden))
	eval := func(ckpt bool) []float32 {
		m := newCkModel(t, seed, 0)
		tape := autograd.NewTape(context.Background())
		defer tape.NoGrad()()
		var out *autograd.Var
		if ckpt {
			out = Checkpoint(tape, m.region, m.opts(), x, z)
		} else {
			out = ckPlain(m)(tape, x, z)
		}
		if tape.Err() != nil {
			t.Fatal(tape.Err())
		}
		return out.Value.Data()
	}
	numtest.SameBits(t, "evaluation output", eval(true), eval(false))
}

func TestCheckpointErrors(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	x := autograd.NewLeaf(randn(1, 1, 3), "x", true)
	out := Checkpoint(tape, func(*autograd.Tape, []*autograd.Var) (*autograd.Var, error) {
		return nil, fmt.Errorf("region failed")
	}, CheckpointOptions{}, x)
	if out.Value != nil || tape.Err() == nil || !strings.Contains(tape.Err().Error(), "region failed") {
		t.Fatalf("output %v, tape error %v; want the region's error", out.Value, tape.Err())
	}
	tape = autograd.NewTape(context.Background())
	Checkpoint(tape, func(*autograd.Tape, []*autograd.Var) (*autograd.Var, error) { return nil, nil }, CheckpointOptions{}, x)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "returned no output") {
		t.Fatalf("tape error %v, want a missing-output error", err)
	}
	runRanks(t, 2, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		odd := autograd.NewLeaf(randn(1, 1, 3, 3), "odd", true)
		Checkpoint(tape, func(t *autograd.Tape, a []*autograd.Var) (*autograd.Var, error) { return a[0], nil },
			CheckpointOptions{DistributeSavedActivations: true, Group: g}, odd)
		if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "9 is not divisible by 2") {
			return fmt.Errorf("distributing 9 elements over 2 ranks: error %v", err)
		}
		return nil
	})
}

// TestCheckpointDistributeSavedActivations: on 1, 2 and 4 ranks, each rank
// (with its own model-parallel stream) gets bitwise the gradients of its
// plain run, while its tape holds only its 1/tp share of x between forward
// and backward.
func TestCheckpointDistributeSavedActivations(t *testing.T) {
	const seed = 500
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(n, " ranks"), func(t *testing.T) {
			wants, gots := make([]ckResult, n), make([]ckResult, n)
			runRanks(t, n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
				r := g.Rank()
				mp, err := newCkModelErr(seed, r)
				if err != nil {
					return err
				}
				if wants[r], _, err = ckRunErr(autograd.NewTape(ctx), mp, seed, ckPlain(mp)); err != nil {
					return err
				}
				mc, err := newCkModelErr(seed, r)
				if err != nil {
					return err
				}
				var held int64
				gots[r], held, err = ckRunErr(tape, mc, seed, func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var {
					opts := mc.opts()
					opts.DistributeSavedActivations, opts.Group = true, g
					return Checkpoint(tape, mc.region, opts, x, z)
				})
				if err != nil {
					return err
				}
				if wantHeld := ckBytes(ckRows*ckHidden/n + ckRows*ckHidden); held != wantHeld {
					return fmt.Errorf("rank %d: forward held %d bytes, want %d (x/%d and z)", r, held, wantHeld, n)
				}
				return nil
			})
			for r := range n {
				ckSame(t, fmt.Sprintf("rank %d of %d", r, n), gots[r], wants[r])
			}
			if n > 1 && !ckDiffers(wants[0], wants[1]) {
				t.Fatal("ranks 0 and 1 drew the same model-parallel masks")
			}
		})
	}
}

// TestCheckpointWithoutOutput: the first half of the region is checkpointed
// without output, its output consumed by the second half (whose layer
// norm saves it); the output is discarded (its storage released, and the
// tape's activation bytes drop by its size) after the layer norm and
// recomputed, into the same tensor, when the gradient reaches the hook.
// Losses, gradients and RNG states equal the plain run bitwise.
func TestCheckpointWithoutOutput(t *testing.T) {
	const seed = 600
	mp := newCkModel(t, seed, 0)
	var plainMid []float32
	want, _ := ckRun(t, autograd.NewTape(context.Background()), mp, seed, func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var {
		h, err := mp.first(tape, []*autograd.Var{x, z})
		if err != nil {
			t.Fatal(err)
		}
		plainMid = h.Value.Clone().Data()
		out, err := mp.second(tape, []*autograd.Var{h})
		if err != nil {
			t.Fatal(err)
		}
		return out
	})

	for _, discard := range []bool{true, false} {
		mc := newCkModel(t, seed, 0)
		var mid *autograd.Var
		got, _ := ckRun(t, autograd.NewTape(context.Background()), mc, seed, func(tape *autograd.Tape, x, z *autograd.Var) *autograd.Var {
			ck := &CheckpointWithoutOutput{Tracker: mc.tr, Default: mc.def}
			mid = ck.Checkpoint(tape, mc.first, x, z)
			if mid.Value == nil {
				t.Fatal(tape.Err())
			}
			numtest.SameBits(t, "forward output", mid.Value.Data(), plainMid)
			ln := nn.LayerNorm(tape, mid, mc.lnw, mc.lnb, 1e-5) // saves mid
			if discard {
				before := tape.ActivationBytes()
				ln = ck.DiscardOutputAndRegisterRecompute(tape, ln)
				if tape.Err() != nil {
					t.Fatal(tape.Err())
				}
				if !mid.Value.Released() {
					t.Fatal("the discarded output's storage is not released")
				}
				_, size := mid.Value.Storage()
				if freed := before - tape.ActivationBytes(); freed != size {
					t.Fatalf("discarding freed %d activation bytes, want the output's %d", freed, size)
				}
			}
			if err := mc.tr.Fork(ModelParallelRNG, func(g *rng.RNG) error {
				ln = nn.Dropout(tape, ln, 0.25, g)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return nn.Dropout(tape, nn.Linear(tape, ln, mc.w2, nil), 0.2, mc.def)
		})
		what := fmt.Sprintf("CheckpointWithoutOutput (discard %v)", discard)
		ckSame(t, what, got, want)
		numtest.SameBits(t, what+": output after backward", mid.Value.Data(), plainMid)
		if c := *mc.counts; c.forward != 2 || c.backwards != 1 {
			t.Fatalf("%s: counts %+v, want 2 forwards and 1 backward", what, c)
		}
	}
}

func TestCheckpointWithoutOutputErrors(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	ck := &CheckpointWithoutOutput{}
	x := autograd.NewLeaf(randn(1, 1, 4), "x", true)
	ck.DiscardOutputAndRegisterRecompute(tape, x)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "call Checkpoint") {
		t.Fatalf("discard before checkpoint: %v", err)
	}
	double := func(t *autograd.Tape, a []*autograd.Var) (*autograd.Var, error) {
		return autograd.Scale(t, a[0], 2), nil
	}
	tape = autograd.NewTape(context.Background())
	y := ck.Checkpoint(tape, double, x)
	ck.DiscardOutputAndRegisterRecompute(tape, autograd.Const(y.Value))
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "does not require grad") {
		t.Fatalf("hook without grad: %v", err)
	}
	tape = autograd.NewTape(context.Background())
	y = ck.Checkpoint(tape, double, x)
	h := ck.DiscardOutputAndRegisterRecompute(tape, autograd.Scale(tape, y, 1))
	ck.DiscardOutputAndRegisterRecompute(tape, h)
	if err := tape.Err(); err == nil || !strings.Contains(err.Error(), "already discarded") {
		t.Fatalf("second discard: %v", err)
	}
	// An output that is one of the inputs is kept, not released.
	tape = autograd.NewTape(context.Background())
	same := x.Value.Clone().Data()
	y = ck.Checkpoint(tape, func(_ *autograd.Tape, a []*autograd.Var) (*autograd.Var, error) { return a[0], nil }, x)
	h = ck.DiscardOutputAndRegisterRecompute(tape, autograd.Scale(tape, y, 3))
	numtest.SameBits(t, "aliased output", y.Value.Data(), same)
	x.Grad = nil
	if err := autograd.Backward(tape, autograd.Sum(tape, h), nil); err != nil {
		t.Fatal(err)
	}
	numtest.SameBits(t, "aliased output grad", x.Grad.Data(), []float32{3, 3, 3, 3})
}
