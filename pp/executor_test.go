package pp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/pp/p2p"
	"github.com/gotron/gotron/tensor"
)

// execConfig is a four-layer GPT split one layer per stage over pp ranks.
func execConfig(pp int) config.TransformerConfig {
	c := config.DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads = 4, 32, 4
	c.SeqLength, c.VocabSize = 16, 64
	c.HiddenDropout, c.AttentionDropout = 0, 0
	c.PipelineModelParallelSize = pp
	c.PipelineDType = config.Float32
	return c
}

// toyStage is one pipeline stage of a toy model, y = gelu(x·Wᵀ) on an
// [s, b, h] activation: the first stage makes x from the microbatch's
// index, the others take it from SetInputTensor; the last stage's loss
// is the sum of y. Each stage keeps the activations of a linear layer and
// a GELU per microbatch, as a transformer layer keeps more of.
type toyStage struct {
	w           *autograd.Var
	in          *autograd.Var
	shape       []int
	first, last bool
}

func newToyStage(rank int, shape []int, first, last bool) *toyStage {
	h := shape[len(shape)-1]
	w := tensor.New(h, h)
	for i, d := 0, w.Data(); i < len(d); i++ {
		d[i] = float32(math.Sin(float64(i+rank))) / float32(h)
	}
	return &toyStage{w: autograd.NewLeaf(w, "w", true), shape: shape, first: first, last: last}
}

func (c *toyStage) SetInputTensor(x *autograd.Var) { c.in = x }

func (c *toyStage) forward(tape *autograd.Tape, mb int) *autograd.Var {
	x := c.in
	if c.first {
		v := tensor.New(c.shape...)
		for i, d := 0, v.Data(); i < len(d); i++ {
			d[i] = float32(math.Cos(float64(i + 7*mb)))
		}
		x = autograd.Const(v)
	}
	return nn.GELU(tape, nn.Linear(tape, x, c.w, nil))
}

// runPipeline runs one training iteration of M microbatches of 2 rows on
// pp in-process ranks and returns each rank's peak activation bytes.
// failAt, when ≥ 0, makes the last rank's forward step of that microbatch
// fail.
func runPipeline(t *testing.T, pp, m int, deallocate bool, failAt int) ([]int64, error) {
	peaks, _, err := runPipelineErrs(t, pp, m, deallocate, failAt)
	return peaks, err
}

// runPipelineErrs is runPipeline that also returns each rank's own error.
func runPipelineErrs(t *testing.T, pp, m int, deallocate bool, failAt int) ([]int64, []error, error) {
	t.Helper()
	cfg := execConfig(pp)
	cfg.DeallocatePipelineOutputs = deallocate
	peaks := make([]int64, pp)
	errs := make([]error, pp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := local.NewWorld(pp, comm.Options{Timeout: 20 * time.Second}).Run(ctx, func(ctx context.Context, g comm.Group) error {
		chunks, err := cfg.PipelineChunks()
		if err != nil {
			return err
		}
		c := chunks[g.Rank()][0]
		shape := []int{cfg.SeqLength, 2, cfg.HiddenSize}
		model := newToyStage(g.Rank(), shape, c.PreProcess, c.PostProcess)
		comms, err := p2p.New(g, p2p.ConfigFrom(&cfg.ModelParallelConfig))
		if err != nil {
			return err
		}
		tape := autograd.NewTape(ctx)
		fwd := func(ctx context.Context, s ForwardStep) (*autograd.Var, LossFunc, error) {
			if s.Microbatch == failAt && g.Rank() == pp-1 {
				return nil, nil, errors.New("injected failure")
			}
			out := model.forward(tape, s.Microbatch)
			if !model.last {
				return out, nil, nil
			}
			return out, func(l *autograd.Var) (Loss, error) {
				return Loss{Value: autograd.Sum(tape, l), NumTokens: int64(l.Value.Len())}, nil
			}, nil
		}
		_, err = GetForwardBackwardFunc(pp, 0)(ctx, Args{
			Config: cfg, Rank: g.Rank(), Tape: tape, Chunks: []Chunk{model}, ForwardStep: fwd,
			P2P: P2P{Comm: comms, Shape: shape}, NumMicrobatches: m,
		})
		peaks[g.Rank()] = tape.PeakActivationBytes()
		errs[g.Rank()] = err
		return err
	})
	return peaks, errs, err
}

// TestOneFOneBActivationsBounded: under 1F1B, rank r's peak activation
// memory, measured by the tape, is that of min(P − r, M) microbatches and
// does not grow with M; deallocate_pipeline_outputs lowers it on every
// rank that sends activations.
func TestOneFOneBActivationsBounded(t *testing.T) {
	const P = 4
	one, err := runPipeline(t, P, 1, true, -1)
	if err != nil {
		t.Fatal(err)
	}
	var prev []int64
	for _, m := range []int{4, 8, 16} {
		peaks, err := runPipeline(t, P, m, true, -1)
		if err != nil {
			t.Fatal(err)
		}
		for r := range P {
			if bound := int64(min(P-r, m)) * one[r]; peaks[r] > bound {
				t.Errorf("M=%d, rank %d: peak %d bytes > min(P−r, M) = %d microbatches of %d", m, r, peaks[r], min(P-r, m), one[r])
			}
			if prev != nil && peaks[r] != prev[r] {
				t.Errorf("M=%d, rank %d: peak %d bytes, with half the microbatches %d: it must not depend on M", m, r, peaks[r], prev[r])
			}
		}
		prev = peaks
	}
	kept, err := runPipeline(t, P, 8, false, -1)
	if err != nil {
		t.Fatal(err)
	}
	for r := range P - 1 {
		if kept[r] <= prev[r] {
			t.Errorf("rank %d: peak %d bytes keeping outputs, %d deallocating them: deallocation must lower it", r, kept[r], prev[r])
		}
	}
	t.Logf("peak bytes per rank: one microbatch %v, M=16 %v, M=8 without deallocation %v", one, prev, kept)
}

// TestRankFailsMidSchedule: when the last stage fails in a forward step,
// every other rank stops with an error naming the failed rank and the
// schedule step it was in, never a hang.
func TestRankFailsMidSchedule(t *testing.T) {
	_, errs, err := runPipelineErrs(t, 4, 8, true, 2)
	if err == nil {
		t.Fatal("no error")
	}
	for r, e := range errs[:3] {
		if e == nil || !strings.Contains(e.Error(), "schedule step") || !strings.Contains(e.Error(), "rank 3") {
			t.Errorf("rank %d: error %v does not name the failed rank 3 and its own schedule step", r, e)
		}
		t.Logf("rank %d: %v", r, e)
	}
	for _, want := range []string{"injected failure", "rank 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	t.Log(err)
}

// TestScaleLoss checks forward_step_calc_loss's normalisation.
func TestScaleLoss(t *testing.T) {
	tape := autograd.NewTape(context.Background())
	v := autograd.NewLeaf(tensor.Scalar(6), "loss", true)
	for _, c := range []struct {
		l        Loss
		perToken bool
		want     float32
	}{
		{Loss{Value: v, NumTokens: 3}, false, 6 / 3 / 2.0},
		{Loss{Value: v, NumTokens: 0}, false, 6 / 2.0},
		{Loss{Value: v, NumTokens: 3}, true, 6},
		{Loss{Value: v, NumTokens: -1}, false, 6 * 3 / 2.0},
	} {
		got, err := scaleLoss(tape, c.l, 2, 3, c.perToken)
		if err != nil {
			t.Fatal(err)
		}
		if g := got.Value.Data()[0]; g != c.want {
			t.Errorf("%+v per-token=%v: %v, want %v", c.l.NumTokens, c.perToken, g, c.want)
		}
	}
	if _, err := scaleLoss(tape, Loss{Value: autograd.NewLeaf(tensor.New(2), "x", false)}, 1, 1, false); err == nil {
		t.Error("a non-scalar loss was accepted")
	}
}

// scalarChunk is a model chunk computing y = w·x on a scalar, for
// executor tests that look at the steps, not the model.
type scalarChunk struct {
	w  *autograd.Var
	in *autograd.Var
}

func (c *scalarChunk) SetInputTensor(x *autograd.Var) { c.in = x }

// runSteps runs the no-pipelining schedule over m microbatches on one
// scalar chunk and returns the forward steps it was asked for and the
// result.
func runSteps(t *testing.T, a Args, m int) ([]ForwardStep, *Result) {
	t.Helper()
	tape := autograd.NewTape(context.Background())
	c := &scalarChunk{w: autograd.NewLeaf(tensor.Scalar(2), "w", true)}
	var steps []ForwardStep
	a.Tape, a.Chunks, a.NumMicrobatches = tape, []Chunk{c}, m
	a.ForwardStep = func(ctx context.Context, s ForwardStep) (*autograd.Var, LossFunc, error) {
		steps = append(steps, s)
		x := autograd.Const(tensor.Scalar(float32(s.Microbatch + 1)))
		y := autograd.WeightedSum(tape, x, tensor.Scalar(1))
		y = autograd.Add(tape, y, c.w)
		return y, func(out *autograd.Var) (Loss, error) {
			if s.CollectNonLossData {
				return Loss{Reported: "data"}, nil
			}
			return Loss{Value: out, NumTokens: 1, Reported: out.Value.Data()[0]}, nil
		}, nil
	}
	res, err := ForwardBackwardNoPipelining(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return steps, res
}

// TestForwardStepOptions: partial activation checkpointing is not applied
// without pipelining (1F1B's k mod (W+1) ≥ N is in
// TestPartialCheckpointsUnder1F1B), first_val_step gates the first
// microbatch flag in evaluation, collect_non_loss_data stores what the loss
// function returns for it, and the losses are stored in microbatch order.
func TestForwardStepOptions(t *testing.T) {
	cfg := execConfig(1)
	n := 1
	cfg.NumMicrobatchesWithPartialActivationCheckpoints = &n
	steps, res := runSteps(t, Args{Config: cfg}, 3)
	// No pipelining passes no choice (the model's recompute setting
	// applies), as the reference's forward_backward_no_pipelining.
	for _, s := range steps {
		if s.CheckpointActivations != nil {
			t.Errorf("microbatch %d: checkpoint %v without pipelining, want nil", s.Microbatch, *s.CheckpointActivations)
		}
	}
	if !steps[0].IsFirstMicrobatch || steps[1].IsFirstMicrobatch {
		t.Errorf("is_first_microbatch %v, %v: want true, false", steps[0].IsFirstMicrobatch, steps[1].IsFirstMicrobatch)
	}
	if len(res.Store) != 3 || res.Store[0] != float32(3) || res.Store[2] != float32(5) || res.NumTokens != 3 {
		t.Errorf("store %v, tokens %d: want the three losses 3, 4, 5 and 3 tokens", res.Store, res.NumTokens)
	}
	f := false
	steps, _ = runSteps(t, Args{Config: execConfig(1), ForwardOnly: true, FirstValStep: &f}, 2)
	if steps[0].IsFirstMicrobatch || steps[0].CheckpointActivations != nil {
		t.Errorf("evaluation with first_val_step false: is_first_microbatch %v, checkpoint %v; want false, nil", steps[0].IsFirstMicrobatch, steps[0].CheckpointActivations)
	}
	_, res = runSteps(t, Args{Config: execConfig(1), ForwardOnly: true, CollectNonLossData: true}, 2)
	if len(res.Store) != 2 || res.Store[0] != "data" {
		t.Errorf("collect_non_loss_data stored %v, want what the loss function gave for it", res.Store)
	}
}

// TestPartialCheckpointsUnder1F1B: under 1F1B with
// num_microbatches_with_partial_activation_checkpoints N, forward k of rank
// r recomputes when k mod (W+1) ≥ N, W = P−r−1 (max_outstanding_backprops
// = W+1); evaluation passes no choice.
func TestPartialCheckpointsUnder1F1B(t *testing.T) {
	const P, M, N = 4, 6, 2
	cfg := execConfig(P)
	n := N
	cfg.NumMicrobatchesWithPartialActivationCheckpoints = &n
	got := make([][]*bool, P)
	err := local.NewWorld(P, comm.Options{Timeout: 20 * time.Second}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		comms, err := p2p.New(g, p2p.ConfigFrom(&cfg.ModelParallelConfig))
		if err != nil {
			return err
		}
		tape := autograd.NewTape(ctx)
		c := &scalarChunk{}
		_, err = ForwardBackwardPipeliningWithoutInterleaving(ctx, Args{
			Config: cfg, Rank: g.Rank(), Tape: tape, Chunks: []Chunk{c}, NumMicrobatches: M,
			P2P: P2P{Comm: comms, Shape: []int{1}},
			ForwardStep: func(ctx context.Context, s ForwardStep) (*autograd.Var, LossFunc, error) {
				got[g.Rank()] = append(got[g.Rank()], s.CheckpointActivations)
				x := s.Input
				if x == nil {
					x = autograd.NewLeaf(tensor.FromSlice([]float32{1}, 1), "x", true)
				}
				y := autograd.Scale(tape, x, 2)
				return y, func(out *autograd.Var) (Loss, error) { return Loss{Value: out, NumTokens: 1}, nil }, nil
			},
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range P {
		w := P - r - 1
		for k, ck := range got[r] {
			if ck == nil || *ck != (k%(w+1) >= N) {
				t.Errorf("rank %d, forward %d: checkpoint %v, want %v (k mod (W+1) = %d, N = %d)", r, k, ck, k%(w+1) >= N, k%(w+1), N)
			}
		}
	}
}

// recTimer records its starts and stops in a shared log.
type recTimer struct {
	name string
	log  *[]string
}

func (r recTimer) Start(barrier bool) {
	*r.log = append(*r.log, fmt.Sprintf("start %s %v", r.name, barrier))
}
func (r recTimer) Stop(barrier bool) {
	*r.log = append(*r.log, fmt.Sprintf("stop %s %v", r.name, barrier))
}

// TestSchedulesTime: with Timers set, a pass is timed whole
// ("forward-backward" at level 1, with barrier_with_l1_time) and each
// forward and backward step's computation (level 2), as the reference's
// schedules do.
func TestSchedulesTime(t *testing.T) {
	var log []string
	levels := map[string]int{}
	cfg := execConfig(1)
	cfg.BarrierWithL1Time = true
	cfg.Timers = func(name string, level int) config.Timer {
		levels[name] = level
		return recTimer{name, &log}
	}
	runSteps(t, Args{Config: cfg}, 2)
	want := "start forward-backward true," +
		"start forward-compute false,stop forward-compute false,start backward-compute false,stop backward-compute false," +
		"start forward-compute false,stop forward-compute false,start backward-compute false,stop backward-compute false," +
		"stop forward-backward true"
	if got := strings.Join(log, ","); got != want {
		t.Errorf("timer events\n%s\nwant\n%s", got, want)
	}
	if levels["forward-backward"] != 1 || levels["forward-compute"] != 2 || levels["backward-compute"] != 2 {
		t.Errorf("timer levels %v", levels)
	}
}

// TestCommTimersNamed: every P2P call a schedule issues has the
// reference's timer name (an unnamed one would time under "").
func TestCommTimersNamed(t *testing.T) {
	for _, cfg := range []Config{
		{PP: 4, Microbatches: 8}, {PP: 4, VPP: 2, Microbatches: 8, OverlapP2PComm: true}, {PP: 4, VPP: 2, Microbatches: 8, BatchP2PComm: true},
		{PP: 4, Microbatches: 8, Schedule: ScheduleZBH2}, {PP: 4, VPP: 2, Microbatches: 8, Schedule: ScheduleZBV},
		{PP: 4, Microbatches: 8, ForwardOnly: true},
	} {
		ss, err := BuildAll(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			for _, a := range s.Actions {
				if a.Kind == Comm && commTimers[a.Call] == "" {
					t.Errorf("%+v: the call %q has no timer name", cfg, a.Call)
				}
			}
		}
	}
}
