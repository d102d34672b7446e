package pp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/internal/numtest"
)

// TestDualPipeVVerifies: every rank's DualPipeV list plays against the
// others with activations and gradients on channels of their own, runs
// 2M forwards, B's and W's, each W after its B and each chunk's W's in
// microbatch order, reduces each chunk once, in training and in
// evaluation, for P 2–5 and M 2P to 2P + 8.
func TestDualPipeVVerifies(t *testing.T) {
	for p := 2; p <= 5; p++ {
		for m := 2 * p; m <= 2*p+8; m++ {
			for _, gs := range []bool{false, true} {
				ss, err := BuildAll(Config{PP: p, VPP: 2, Microbatches: m, GradSyncFunc: gs, Schedule: ScheduleDualPipeV})
				if err != nil {
					t.Fatal(err)
				}
				res, err := Verify(ss)
				if err != nil {
					t.Fatalf("pp %d, %d microbatches, grad_sync_func %v: %v", p, m, gs, err)
				}
				for r, s := range ss {
					if s.Placement != config.PlacementV || count(s, Forward) != 2*m || count(s, Backward) != 2*m || count(s, WeightGrad) != 2*m {
						t.Errorf("pp %d, m %d, rank %d: not a V-placed split schedule of 2M forwards, B's and W's: %v", p, m, r, s.Actions)
					}
					next := [2]int{}
					for _, a := range s.Actions {
						if a.Kind == WeightGrad {
							if a.Microbatch != next[a.Chunk] {
								t.Fatalf("pp %d, m %d, rank %d: W(m%d, c%d) out of microbatch order", p, m, r, a.Microbatch, a.Chunk)
							}
							next[a.Chunk]++
						}
					}
					if want := HeldMicrobatches(ScheduleDualPipeV, p, r, m); res.PeakLive[r] > 2*want {
						t.Errorf("pp %d, m %d, rank %d: %d chunks' activations alive, above 2·%d", p, m, r, res.PeakLive[r], want)
					}
				}
			}
			fo, err := BuildAll(Config{PP: p, VPP: 2, Microbatches: m, ForwardOnly: true, Schedule: ScheduleDualPipeV})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(fo); err != nil {
				t.Fatalf("pp %d, %d microbatches, forward-only: %v", p, m, err)
			}
		}
	}
}

// TestDualPipeVOrder: DualPipeV's compute order at P = 2, M = 4, by hand
// from the eight steps of DualPipeV's documentation (F0 a forward of
// chunk 0, W1 a weight gradient of chunk 1, the digit after the dot the
// microbatch). Rank 0: two F0's, one pair F0 F1, one triple B1 W1 F1, one
// main step F0 B1 F1 B0 (backwards whole), one B1 F1 B0, one pair B1 B0
// (the B0's W put off), one W B0, the last W. Rank 1: two pairs F0 F1,
// two main steps, two pairs B1 B0 (the second's W's put off), two W's.
func TestDualPipeVOrder(t *testing.T) {
	want := [][]string{
		{"F0.0", "F0.1", "F0.2", "F1.0", "B1.0", "W1.0", "F1.1", "F0.3", "B1.1", "W1.1", "F1.2", "B0.0", "W0.0",
			"B1.2", "W1.2", "F1.3", "B0.1", "W0.1", "B1.3", "W1.3", "B0.2", "W0.2", "B0.3", "W0.3"},
		{"F0.0", "F1.0", "F0.1", "F1.1", "F0.2", "B1.0", "W1.0", "F1.2", "B0.0", "W0.0", "F0.3", "B1.1", "W1.1",
			"F1.3", "B0.1", "W0.1", "B1.2", "W1.2", "B0.2", "W0.2", "B1.3", "B0.3", "W1.3", "W0.3"},
	}
	for r, w := range want {
		var got []string
		for _, a := range DualPipeV(2, r, 4, false, false).Actions {
			if a.Kind.computes() {
				got = append(got, fmt.Sprintf("%v%d.%d", a.Kind, a.Chunk, a.Microbatch))
			}
		}
		if !slices.Equal(got, w) {
			t.Errorf("rank %d:\n got %v\nwant %v", r, got, w)
		}
	}
}

// TestDualPipeVRefused: DualPipeV needs ZB-V's settings and at least 2P
// microbatches.
func TestDualPipeVRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{PP: 2, VPP: 2, Microbatches: 3, Schedule: ScheduleDualPipeV}, "needs at least 2·pipeline_model_parallel_size = 4 microbatches"},
		{Config{PP: 2, Microbatches: 8, Schedule: ScheduleDualPipeV}, "dualpipev runs two model chunks per rank"},
		{Config{PP: 1, Microbatches: 8, Schedule: ScheduleDualPipeV}, "dualpipev: pipeline_model_parallel_size = 1"},
	} {
		if _, err := Build(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestDualPipeVMatchesInterleaved: the toy pipeline over 2P stages gives
// every stage's weight gradient bit for bit under DualPipeV as under the
// interleaved 1F1B, each chunk's hook outside no_sync once.
func TestDualPipeVMatchesInterleaved(t *testing.T) {
	for _, p := range []int{2, 4} {
		for _, m := range []int{2 * p, 4 * p} {
			want, _ := runTwoChunkPipeline(t, p, m, "", true)
			got, _ := runTwoChunkPipeline(t, p, m, ScheduleDualPipeV, true)
			for s := range want {
				numtest.SameBits(t, fmt.Sprintf("pp %d, m %d, stage %d: the weight gradient", p, m, s), got[s], want[s])
			}
		}
	}
}
