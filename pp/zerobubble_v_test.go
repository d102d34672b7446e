package pp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/pp/p2p"
)

// TestZeroBubbleVVerifies: every rank's ZB-V list plays against the
// others with activations and gradients on channels of their own, runs
// 2M forwards, B's and W's (each W after its B), reduces each chunk once,
// and holds at most 2P chunks' activations, P microbatches of the rank's
// layers, the first stage's under 1F1B: the paper's memory claim.
func TestZeroBubbleVVerifies(t *testing.T) {
	for p := 2; p <= 5; p++ {
		for m := 1; m <= 12; m++ {
			for _, gs := range []bool{false, true} {
				zb, err := BuildAll(Config{PP: p, VPP: 2, Microbatches: m, GradSyncFunc: gs, Schedule: ScheduleZBV})
				if err != nil {
					t.Fatal(err)
				}
				res, err := Verify(zb)
				if err != nil {
					t.Fatalf("pp %d, %d microbatches, grad_sync_func %v: %v", p, m, gs, err)
				}
				for r, s := range zb {
					if !s.SplitBackward || s.Placement != config.PlacementV || count(s, Forward) != 2*m || count(s, Backward) != 2*m || count(s, WeightGrad) != 2*m {
						t.Errorf("pp %d, m %d, rank %d: not a V-placed split schedule of 2M forwards, B's and W's: %v", p, m, r, s.Actions)
					}
					if res.PeakLive[r] > 2*p {
						t.Errorf("pp %d, m %d, rank %d: %d chunks' activations alive, above 2P = %d", p, m, r, res.PeakLive[r], 2*p)
					}
				}
			}
			// Evaluation: the same forwards on the same placement, inside
			// no_sync throughout (grad_sync_func never called).
			fo, err := BuildAll(Config{PP: p, VPP: 2, Microbatches: m, ForwardOnly: true, GradSyncFunc: true, Schedule: ScheduleZBV})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(fo); err != nil {
				t.Fatalf("pp %d, %d microbatches, forward-only: %v", p, m, err)
			}
			if fo[0].Placement != config.PlacementV || count(fo[0], Forward) != 2*m || count(fo[0], Backward) != 0 ||
				count(fo[0], EnableGradSync)+count(fo[0], GradSync) != 0 {
				t.Errorf("pp %d, m %d: the forward-only ZB-V is not 2M forwards on the V: %v", p, m, fo[0].Actions)
			}
		}
	}
}

// TestZeroBubbleVOrder: ZB-V's compute order at P = 2, M = 4, by hand
// from the phases of ZeroBubbleV's documentation (F0 is a forward of
// chunk 0, W1 a weight gradient of chunk 1; the digit after the dot the
// microbatch). Rank 0: three forwards of chunk 0 (2(P − r) − 1), no
// pairs, two triples F1 B1 W1, two steady steps (the second without F0,
// chunk 0's forwards all run), two pairs B0 W0. Rank 1: one forward,
// one pair F1 F0, one triple, two steady steps, one pair B0 B1, one pair
// B0 W0, then the W's put off.
func TestZeroBubbleVOrder(t *testing.T) {
	want := [][]string{
		{"F0.0", "F0.1", "F0.2", "F1.0", "B1.0", "W1.0", "F1.1", "B1.1", "W1.1",
			"F0.3", "B0.0", "W0.0", "F1.2", "B1.2", "W1.2", "B0.1", "W0.1", "F1.3", "B1.3", "W1.3",
			"B0.2", "W0.2", "B0.3", "W0.3"},
		{"F0.0", "F1.0", "F0.1", "F1.1", "B1.0", "W1.0",
			"F0.2", "B0.0", "W0.0", "F1.2", "B1.1", "W1.1", "F0.3", "B0.1", "W0.1", "F1.3", "B1.2", "W1.2",
			"B0.2", "B1.3", "B0.3", "W0.2", "W1.3", "W0.3"},
	}
	for r, w := range want {
		var got []string
		for _, a := range ZeroBubbleV(2, r, 4, false, false).Actions {
			if a.Kind.computes() {
				got = append(got, fmt.Sprintf("%v%d.%d", a.Kind, a.Chunk, a.Microbatch))
			}
		}
		if !slices.Equal(got, w) {
			t.Errorf("rank %d:\n got %v\nwant %v", r, got, w)
		}
	}
}

// TestSimulateZeroBubbleV: at equal F, B and W and no communication cost
// ZB-V has no bubble once M ≥ 2P − 1 (each rank busy M·2·(F+B+W) from
// its first forward to its last W), and fewer microbatches leave one.
func TestSimulateZeroBubbleV(t *testing.T) {
	for p := 2; p <= 5; p++ {
		for m := 1; m <= 3*p; m++ {
			ss, err := BuildAll(Config{PP: p, VPP: 2, Microbatches: m, Schedule: ScheduleZBV})
			if err != nil {
				t.Fatal(err)
			}
			sim, err := Simulate(ss, StageTimes{F: 1, B: 1, W: 1})
			if err != nil {
				t.Fatal(err)
			}
			if work := float64(6 * m); m >= 2*p-1 && (sim.Makespan != work || sim.BubbleRate != 0) {
				t.Errorf("pp %d, m %d: makespan %v, bubble rate %v; want %v and 0", p, m, sim.Makespan, sim.BubbleRate, work)
			} else if m < 2*p-1 && sim.BubbleRate <= 0 {
				t.Errorf("pp %d, m %d: bubble rate %v with fewer than 2P − 1 microbatches", p, m, sim.BubbleRate)
			}
		}
	}
}

// TestZeroBubbleVRefused: ZB-V needs two chunks per rank on at least
// two ranks and no overlap_p2p_comm.
func TestZeroBubbleVRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{PP: 1, Microbatches: 4, Schedule: ScheduleZBV}, "zb-v: pipeline_model_parallel_size = 1"},
		{Config{PP: 2, Microbatches: 4, Schedule: ScheduleZBV}, "virtual_pipeline_model_parallel_size is unset: set --virtual-pipeline-model-parallel-size 2"},
		{Config{PP: 2, VPP: 3, Microbatches: 4, Schedule: ScheduleZBV}, "virtual_pipeline_model_parallel_size is 3"},
		{Config{PP: 2, VPP: 2, Microbatches: 4, Schedule: ScheduleZBV, OverlapP2PComm: true}, "turn --overlap-p2p-communication off"},
		{Config{PP: 2, VPP: 2, Microbatches: 4, Schedule: ScheduleZBV, DeferEmbeddingWgrad: true}, "already defers every weight gradient"},
	} {
		if _, err := Build(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestZeroBubbleVMatchesInterleaved: the toy pipeline cut into 2P stages
// gives every stage's weight gradient bit for bit under ZB-V (V
// placement, stage 2P − 1 − r on rank r's chunk 1, the last rank handing
// its chunk 0's output to its chunk 1) as under the interleaved 1F1B
// (loop placement), each chunk's hook outside no_sync once, on the whole
// gradient; and the tape's peak on every rank stays within 2P chunks'
// activations (1F1B's first stage holds P microbatches of its two
// stages), below the interleaved schedule's first rank.
func TestZeroBubbleVMatchesInterleaved(t *testing.T) {
	for _, p := range []int{2, 4} {
		for _, m := range []int{2 * p, 4 * p} {
			want, ipeaks := runTwoChunkPipeline(t, p, m, "", true)
			got, peaks := runTwoChunkPipeline(t, p, m, ScheduleZBV, true)
			for s := range want {
				numtest.SameBits(t, fmt.Sprintf("pp %d, m %d, stage %d: the weight gradient", p, m, s), got[s], want[s])
			}
			// One microbatch: the last rank holds its two chunks' whole
			// activations at once, neither of them the loss's.
			_, one := runTwoChunkPipeline(t, p, 1, ScheduleZBV, true)
			chunk := one[p-1] / 2
			for r, b := range peaks {
				if b > int64(2*p)*chunk {
					t.Errorf("pp %d, m %d, rank %d: %d activation bytes, above 2P = %d chunks of %d", p, m, r, b, 2*p, chunk)
				}
			}
			if peaks[0] >= ipeaks[0] {
				t.Errorf("pp %d, m %d: ZB-V's first rank holds %d bytes, the interleaved schedule's %d", p, m, peaks[0], ipeaks[0])
			}
		}
	}
}

// TestZeroBubbleVNeedsGradComm: without a second communicator for the
// gradients the executor refuses a ZB-V schedule, naming the fix; and a
// model whose chunks are not placed in a V is refused the schedule.
func TestZeroBubbleVNeedsGradComm(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("ZB-V ran without a gradient communicator")
		}
	}()
	runTwoChunkPipeline(t, 2, 4, ScheduleZBV, false)
}

func TestZeroBubbleVNeedsVPlacement(t *testing.T) {
	s := ZeroBubbleV(2, 0, 4, false, false)
	_, err := run(context.Background(), Args{Config: execConfig(2), Chunks: []Chunk{nil, nil}}, s)
	if err == nil || !strings.Contains(err.Error(), "placement") {
		t.Errorf("a loop-placed model under ZB-V: %v, want a placement error", err)
	}
}

// runTwoChunkPipeline runs one iteration of the toy pipeline over 2P
// stages, two chunks per rank, under sched ("": the interleaved 1F1B;
// ScheduleZBV), gradients on a communicator of their own when gradComm,
// and returns each stage's weight gradient and each rank's peak
// activation bytes. It fails the test unless each chunk's hook ran once
// outside no_sync, on the whole gradient; an executor error panics with
// it.
func runTwoChunkPipeline(t *testing.T, p, m int, sched string, gradComm bool) ([][]float32, []int64) {
	t.Helper()
	cfg := execConfig(p)
	cfg.VirtualPipelineModelParallelSize = 2
	place := PlacementOf(sched)
	cfg.PipelinePlacement = place
	out := make([][]float32, 2*p)
	peaks := make([]int64, p)
	err := local.NewWorld(p, comm.Options{Timeout: 20 * time.Second}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		shape := []int{cfg.SeqLength, 2, cfg.HiddenSize}
		noSync := false
		var models []*toyStage
		var chunks []Chunk
		synced, atSync := make([]int, 2), make([][]float32, 2)
		for v := range 2 {
			s := place.Stage(p, 2, g.Rank(), v)
			model := newToyStage(s, shape, s == 0, s == 2*p-1)
			model.w.MarkParameter()
			model.w.AddGradHook(func(_ context.Context, w *autograd.Var) {
				if !noSync {
					synced[v]++
					atSync[v] = slices.Clone(w.Grad.Data())
				}
			})
			models, chunks = append(models, model), append(chunks, model)
		}
		rc := cfg
		rc.NoSyncFunc = func() func() { noSync = true; return func() { noSync = false } }
		rc.BatchP2PComm = false
		comms, err := p2p.New(g, p2p.ConfigFrom(&rc.ModelParallelConfig))
		if err != nil {
			return err
		}
		link := P2P{Comm: comms, Shape: shape}
		if gradComm {
			gg, err := g.NewSubgroups(ctx, "pipeline gradients", [][]int{rankList(p)})
			if err != nil {
				return err
			}
			if link.GradComm, err = p2p.New(gg, p2p.ConfigFrom(&rc.ModelParallelConfig)); err != nil {
				return err
			}
		}
		tape := autograd.NewTape(ctx)
		fwd := func(ctx context.Context, s ForwardStep) (*autograd.Var, LossFunc, error) {
			model := models[s.Chunk]
			out := model.forward(tape, s.Microbatch)
			if !model.last {
				return out, nil, nil
			}
			return out, func(l *autograd.Var) (Loss, error) {
				return Loss{Value: autograd.Sum(tape, l), NumTokens: int64(l.Value.Len())}, nil
			}, nil
		}
		a := Args{Config: rc, Rank: g.Rank(), Tape: tape, Chunks: chunks, ForwardStep: fwd,
			P2P: link, NumMicrobatches: m, Schedule: sched}
		if _, err := GetForwardBackwardFunc(p, 2)(ctx, a); err != nil {
			return err
		}
		for v, model := range models {
			s := place.Stage(p, 2, g.Rank(), v)
			out[s] = model.w.Grad.Data()
			if synced[v] != 1 || !slices.Equal(atSync[v], out[s]) { // NaN-free: equal values are equal bits but for ±0
				t.Errorf("%q, stage %d: the hook ran %d times outside no_sync, want once, on the whole gradient", sched, s, synced[v])
			}
		}
		peaks[g.Rank()] = tape.PeakActivationBytes()
		return nil
	})
	if err != nil {
		panic(err)
	}
	return out, peaks
}

func rankList(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
