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
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/pp/p2p"
)

// TestZeroBubbleH1Verifies: every rank's ZB-H1 list plays against the
// others (each send meets its receive, no deadlock), runs every W once
// after its B, leaves no_sync only for the last W (or calls grad_sync
// after it), and keeps no more microbatches alive than 1F1B's first
// stage (the paper's memory claim).
func TestZeroBubbleH1Verifies(t *testing.T) {
	for p := 2; p <= 5; p++ {
		for m := 1; m <= 10; m++ {
			for _, gs := range []bool{false, true} {
				cfg := Config{PP: p, Microbatches: m, GradSyncFunc: gs}
				base, err := BuildAll(cfg)
				if err != nil {
					t.Fatal(err)
				}
				cfg.Schedule = ScheduleZBH1
				zb, err := BuildAll(cfg)
				if err != nil {
					t.Fatal(err)
				}
				res, err := Verify(zb)
				if err != nil {
					t.Fatalf("pp %d, %d microbatches, grad_sync_func %v: %v", p, m, gs, err)
				}
				ref, err := Verify(base)
				if err != nil {
					t.Fatal(err)
				}
				for r := range zb {
					if !zb[r].SplitBackward || count(zb[r], WeightGrad) != m || count(zb[r], Backward) != m {
						t.Errorf("pp %d, m %d, rank %d: not a split schedule of %d B and %d W: %v", p, m, r, m, m, zb[r].Actions)
					}
					if res.PeakLive[r] > ref.PeakLive[0] {
						t.Errorf("pp %d, m %d, rank %d: %d microbatches alive, more than 1F1B's first stage's %d", p, m, r, res.PeakLive[r], ref.PeakLive[0])
					}
				}
			}
		}
	}
}

func count(s *Schedule, k Kind) int {
	n := 0
	for _, a := range s.Actions {
		if a.Kind == k {
			n++
		}
	}
	return n
}

// TestZeroBubbleH1Defers: stage s of ZB-H1 has s weight gradients
// pending at each forward of its steady state (none on the first stage,
// P − 1 on the last), never more, and sends each B's gradient before
// running any W held back behind it.
func TestZeroBubbleH1Defers(t *testing.T) {
	const p, m = 4, 8
	for s := range p {
		sched := ZeroBubbleH1(p, s, m, false)
		b, w, most := 0, 0, 0
		for i, a := range sched.Actions {
			switch a.Kind {
			case Backward:
				b++
				if s > 0 && sched.Actions[i+1].Kind == WeightGrad {
					t.Errorf("stage %d: a W runs before B(m%d)'s gradient is sent: %v", s, a.Microbatch, sched.Actions)
				}
			case WeightGrad:
				w++
			case Forward:
				most = max(most, b-w) // W's pending once the last B's gradient went upstream
			}
		}
		if most != s {
			t.Errorf("stage %d: at most %d W's pending at a forward, want %d:\n%v", s, most, s, sched.Actions)
		}
	}
}

// TestSplitSchedulesRefused: ZB-H1 and ZB-H2 where they cannot run, and
// the schedules that post receives early with shape-carrying messages,
// are refused with the rule and the fix.
func TestSplitSchedulesRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{PP: 1, Microbatches: 4, Schedule: ScheduleZBH1}, "no pipeline bubble"},
		{Config{PP: 2, VPP: 2, Microbatches: 4, Schedule: ScheduleZBH1}, "one model chunk per rank"},
		{Config{PP: 1, Microbatches: 4, Schedule: ScheduleZBH2}, "zb-h2: pipeline_model_parallel_size = 1"},
		{Config{PP: 2, VPP: 2, Microbatches: 4, Schedule: ScheduleZBH2}, "zb-h2 runs one model chunk per rank"},
		{Config{PP: 2, Microbatches: 4, Schedule: "zb-h9"}, `"zb-h9"`},
		// Shape-carrying messages block the receives these post early.
		{Config{PP: 2, Microbatches: 4, Schedule: ScheduleZBH2, ExchangesShapes: true}, "zb-h2 with pipeline messages that carry their shapes"},
		{Config{PP: 2, VPP: 2, Microbatches: 4, Schedule: ScheduleZBV, ExchangesShapes: true}, "zb-v with pipeline messages that carry their shapes"},
		{Config{PP: 2, VPP: 2, Microbatches: 4, Schedule: ScheduleDualPipeV, ExchangesShapes: true}, "dualpipev with pipeline messages"},
	} {
		if _, err := Build(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestSplitSchedulesMatchOneFOneB: the toy pipeline's weight gradients
// under SplitEachBackward, ZB-H1 and ZB-H2 equal 1F1B's bit for bit on every
// rank, over P = 2 and 4 and 4 and 7 microbatches, and each rank's
// gradient hook runs outside no_sync once, when the gradient is whole.
func TestSplitSchedulesMatchOneFOneB(t *testing.T) {
	for _, p := range []int{2, 4} {
		for _, m := range []int{4, 7} {
			want, peaks := runSplitPipeline(t, p, m, "", toyOpts{})
			for _, sched := range []string{NameSplit, ScheduleZBH1, ScheduleZBH2} {
				got, zbPeaks := runSplitPipeline(t, p, m, sched, toyOpts{})
				for r := range want {
					numtest.SameBits(t, fmt.Sprintf("pp %d, m %d, %s, rank %d: the weight gradient", p, m, sched, r), got[r], want[r])
				}
				if sched == ScheduleZBH2 {
					// Up to 2P − 1 microbatches: under twice 1F1B's first
					// stage, the first stage's 2P − 1 forwards above it.
					for r, b := range zbPeaks {
						if b >= 2*peaks[0] || (r == 0 && m >= 2*p-1 && b <= peaks[0]) {
							t.Errorf("pp %d, m %d, rank %d: ZB-H2 holds %d activation bytes, want under twice 1F1B's first stage's %d (and above it on the first stage)", p, m, r, b, peaks[0])
						}
					}
				}
				if sched != ScheduleZBH1 {
					continue
				}
				// The tape counts what deferred W's hold: more than 1F1B
				// on the last stage, never more than 1F1B's first stage.
				for r, b := range zbPeaks {
					if b > peaks[0] {
						t.Errorf("pp %d, m %d, rank %d: ZB-H1 holds %d activation bytes, above 1F1B's first stage's %d", p, m, r, b, peaks[0])
					}
				}
				if zbPeaks[p-1] <= peaks[p-1] {
					t.Errorf("pp %d, m %d: the last stage's peak %d under ZB-H1 is not above 1F1B's %d: its deferred W's are not counted", p, m, zbPeaks[p-1], peaks[p-1])
				}
			}
		}
	}
}

// toyOpts are runSplitPipeline's settings beyond the schedule.
type toyOpts struct {
	// defers turns defer_embedding_wgrad_compute on, with
	// wgrad_deferral_limit deferLimit; the last stage's weight stands
	// for its output layer's.
	defers     bool
	deferLimit int
	// gradSync gives the config a grad_sync_func, which then reduces.
	gradSync bool
}

// runSplitPipeline runs one iteration of the toy pipeline (its weight a
// parameter) under schedule sched ("": 1F1B; NameSplit: 1F1B with each
// backward split) and returns every rank's weight gradient and peak
// activation bytes. It fails the test unless each rank's gradient was
// reduced once, whole: by its hook outside no_sync, or with o.gradSync by
// grad_sync_func and never by the hook.
func runSplitPipeline(t *testing.T, p, m int, sched string, o toyOpts) ([][]float32, []int64) {
	t.Helper()
	cfg := execConfig(p)
	out := make([][]float32, p)
	peaks := make([]int64, p)
	err := local.NewWorld(p, comm.Options{Timeout: 20 * time.Second}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		chunks, err := cfg.PipelineChunks()
		if err != nil {
			return err
		}
		c := chunks[g.Rank()][0]
		shape := []int{cfg.SeqLength, 2, cfg.HiddenSize}
		model := newToyStage(g.Rank(), shape, c.PreProcess, c.PostProcess)
		model.w.MarkParameter()
		noSync, synced := false, 0
		var atSync []float32
		model.w.AddGradHook(func(_ context.Context, v *autograd.Var) {
			if !noSync {
				synced++
				atSync = append([]float32(nil), v.Grad.Data()...)
			}
		})
		rc := cfg
		rc.NoSyncFunc = func() func() { noSync = true; return func() { noSync = false } }
		rc.BatchP2PComm = false // ZB-H1's exchanges are asynchronous
		rc.DeferEmbeddingWgradCompute, rc.WgradDeferralLimit = o.defers, o.deferLimit
		if o.gradSync {
			rc.GradSyncFunc = func(context.Context, int) error {
				synced++
				atSync = append([]float32(nil), model.w.Grad.Data()...)
				return nil
			}
		}
		comms, err := p2p.New(g, p2p.ConfigFrom(&rc.ModelParallelConfig))
		if err != nil {
			return err
		}
		tape := autograd.NewTape(ctx)
		fwd := func(ctx context.Context, s ForwardStep) (*autograd.Var, LossFunc, error) {
			out := model.forward(tape, s.Microbatch)
			if !model.last {
				return out, nil, nil
			}
			return out, func(l *autograd.Var) (Loss, error) {
				return Loss{Value: autograd.Sum(tape, l), NumTokens: int64(l.Value.Len())}, nil
			}, nil
		}
		a := Args{Config: rc, Rank: g.Rank(), Tape: tape, Chunks: []Chunk{model}, ForwardStep: fwd,
			P2P: P2P{Comm: comms, Shape: shape}, NumMicrobatches: m, Schedule: sched}
		if model.last {
			a.OutputWeight = model.w
		}
		if sched == NameSplit {
			s, err := Build(Config{PP: p, Rank: g.Rank(), Microbatches: m})
			if err != nil {
				return err
			}
			_, err = run(ctx, a, SplitEachBackward(s))
			if err != nil {
				return err
			}
		} else if _, err := GetForwardBackwardFunc(p, 0)(ctx, a); err != nil {
			return err
		}
		out[g.Rank()], peaks[g.Rank()] = model.w.Grad.Data(), tape.PeakActivationBytes()
		if synced != 1 || !slices.Equal(atSync, out[g.Rank()]) { // NaN-free: equal values are equal bits but for ±0
			t.Errorf("%s, rank %d: the hook ran %d times outside no_sync (want once, on the whole gradient)", sched, g.Rank(), synced)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, peaks
}

// TestZeroBubbleH2Verifies: every rank's ZB-H2 list plays against the
// others, runs each W once after its B, and every stage holds min(2P − 1,
// M) microbatches alive (a forward until its W), under twice 1F1B's first
// stage's P: the paper's memory claim.
func TestZeroBubbleH2Verifies(t *testing.T) {
	for p := 2; p <= 5; p++ {
		for m := 1; m <= 12; m++ {
			for _, gs := range []bool{false, true} {
				zb, err := BuildAll(Config{PP: p, Microbatches: m, GradSyncFunc: gs, Schedule: ScheduleZBH2})
				if err != nil {
					t.Fatal(err)
				}
				res, err := Verify(zb)
				if err != nil {
					t.Fatalf("pp %d, %d microbatches, grad_sync_func %v: %v", p, m, gs, err)
				}
				if _, err := VerifyWith(zb, VerifyOptions{SharedPairFIFO: true}); err != nil {
					t.Fatalf("pp %d, m %d, one queue per pair of ranks: %v", p, m, err)
				}
				for r := range zb {
					if !zb[r].SplitBackward || count(zb[r], WeightGrad) != m || count(zb[r], Backward) != m {
						t.Errorf("pp %d, m %d, rank %d: not a split schedule of %d B and %d W: %v", p, m, r, m, m, zb[r].Actions)
					}
					if want := min(2*p-1, m); res.PeakLive[r] != want {
						t.Errorf("pp %d, m %d, rank %d: %d microbatches alive, want %d", p, m, r, res.PeakLive[r], want)
					}
				}
			}
		}
	}
}

// TestZeroBubbleH2Order: ZB-H2's compute order at P = 2, M = 4, by
// hand from the paper's rule (stage s's step x: F(x), B(x − 2(P−1−s)),
// W(x − 2(P−1))): the first stage runs 2P − 1 = 3 forwards before its
// first B, the last stage a B right after each forward and its W's two
// steps behind, ending in W's alone.
func TestZeroBubbleH2Order(t *testing.T) {
	want := [][]string{
		{"F0", "F1", "F2", "B0", "W0", "F3", "B1", "W1", "B2", "W2", "B3", "W3"},
		{"F0", "B0", "F1", "B1", "F2", "B2", "W0", "F3", "B3", "W1", "W2", "W3"},
	}
	for s, w := range want {
		var got []string
		for _, a := range ZeroBubbleH2(2, s, 4, false).Actions {
			if a.Kind == Forward || a.Kind == Backward || a.Kind == WeightGrad {
				got = append(got, fmt.Sprintf("%v%d", a.Kind, a.Microbatch))
			}
		}
		if !slices.Equal(got, w) {
			t.Errorf("stage %d: %v, want %v", s, got, w)
		}
	}
}

// TestHeldMicrobatches: the memory estimate's count of live microbatches
// is what Verify finds in each schedule.
func TestHeldMicrobatches(t *testing.T) {
	for _, sched := range []string{"", ScheduleZBH1, ScheduleZBH2} {
		for p := 2; p <= 5; p++ {
			for m := 1; m <= 10; m++ {
				ss, err := BuildAll(Config{PP: p, Microbatches: m, Schedule: sched})
				if err != nil {
					t.Fatal(err)
				}
				res, err := Verify(ss)
				if err != nil {
					t.Fatal(err)
				}
				for r := range p {
					if got := HeldMicrobatches(sched, p, r, m); got != res.PeakLive[r] {
						t.Errorf("%q, pp %d, m %d, rank %d: %d, Verify finds %d", sched, p, m, r, got, res.PeakLive[r])
					}
				}
			}
		}
	}
	// ZB-V counts chunks of half the rank's layers: twice the count
	// bounds them, reached on the last rank once M ≥ 2P − 1.
	for p := 2; p <= 5; p++ {
		for m := 1; m <= 12; m++ {
			ss, err := BuildAll(Config{PP: p, VPP: 2, Microbatches: m, Schedule: ScheduleZBV})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Verify(ss)
			if err != nil {
				t.Fatal(err)
			}
			for r := range p {
				held := 2 * HeldMicrobatches(ScheduleZBV, p, r, m)
				if res.PeakLive[r] > held || m >= 2*p-1 && r == p-1 && res.PeakLive[r] != held {
					t.Errorf("zb-v, pp %d, m %d, rank %d: %d chunks, Verify finds %d", p, m, r, held, res.PeakLive[r])
				}
			}
		}
	}
}
