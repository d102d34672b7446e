package pp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/internal/numtest"
)

// TestDeferEmbeddingWgradVerifies: under defer_embedding_wgrad_compute
// the last rank of 1F1B and of the interleaved schedule defers its last
// chunk's last min(limit, M) microbatches (all at limit 0) to one
// emb_wgrad after everything else, with or without grad_sync_func, and
// every rank's list still plays against the others; no other rank
// changes.
func TestDeferEmbeddingWgradVerifies(t *testing.T) {
	for _, c := range []struct{ p, vpp, m int }{{2, 0, 1}, {2, 0, 4}, {3, 0, 7}, {4, 0, 8}, {2, 2, 4}, {4, 2, 8}} {
		for _, gs := range []bool{false, true} {
			for _, limit := range []int{0, 1, 3, 100} {
				cfg := Config{PP: c.p, VPP: c.vpp, Microbatches: c.m, GradSyncFunc: gs, OverlapP2PComm: c.vpp > 0, DeallocatePipelineOutputs: true}
				base := mustBuildAll(t, cfg)
				cfg.DeferEmbeddingWgrad, cfg.WgradDeferralLimit = true, limit
				ss := mustBuildAll(t, cfg)
				name := fmt.Sprintf("pp %d, vpp %d, m %d, grad_sync_func %v, limit %d", c.p, c.vpp, c.m, gs, limit)
				if _, err := Verify(ss); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				want := c.m
				if limit > 0 {
					want = min(limit, c.m)
				}
				last := ss[c.p-1]
				if last.DeferredEmbeddingWgrads != want || count(last, EmbeddingWgrad) != 1 {
					t.Errorf("%s: %d deferred, %d emb_wgrad, want %d and 1", name, last.DeferredEmbeddingWgrads, count(last, EmbeddingWgrad), want)
				}
				for r := range c.p - 1 {
					if fmt.Sprint(ss[r].Actions) != fmt.Sprint(base[r].Actions) {
						t.Errorf("%s: rank %d's list changed", name, r)
					}
				}
			}
		}
	}
}

// TestDeferEmbeddingWgradRefused: the verifier catches a grad_sync that
// would reduce the output layer before its deferred work, and a list that
// never runs it; the config refuses a limit below 0, one stage and a
// zero-bubble schedule (which defers every weight gradient already).
func TestDeferEmbeddingWgradRefused(t *testing.T) {
	synced := mustBuildAll(t, Config{PP: 2, Microbatches: 4, GradSyncFunc: true, DeferEmbeddingWgrad: true})
	acts, n := synced[1].Actions, len(synced[1].Actions) // … sync, no_sync, emb_wgrad, sync, grad_sync
	early := *synced[1]                                  // grad_sync before the deferred work
	early.Actions = append(append([]Action(nil), acts[:n-4]...), acts[n-1], acts[n-4], acts[n-3], acts[n-2])
	hooked := mustBuildAll(t, Config{PP: 2, Microbatches: 4, DeferEmbeddingWgrad: true})
	lost := *hooked[1] // the deferred work never runs
	lost.Actions = lost.Actions[:len(lost.Actions)-1]
	for name, ss := range map[string][]*Schedule{"grad_sync first": {synced[0], &early}, "no emb_wgrad": {hooked[0], &lost}} {
		if _, err := Verify(ss); err == nil || !strings.Contains(err.Error(), "output-layer weight gradients") {
			t.Errorf("%s: %v, want the deferred work named", name, err)
		}
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{PP: 1, Microbatches: 4, DeferEmbeddingWgrad: true}, "pipeline_model_parallel_size = 1"},
		{Config{PP: 2, Microbatches: 4, DeferEmbeddingWgrad: true, WgradDeferralLimit: -1}, "wgrad_deferral_limit = -1"},
		{Config{PP: 2, Microbatches: 4, DeferEmbeddingWgrad: true, Schedule: ScheduleZBH1}, "already defers every weight gradient"},
	} {
		if _, err := Build(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestDeferEmbeddingWgradMatchesOneFOneB: the toy pipeline's gradients
// with the last stage's weight deferred to the flush equal 1F1B's bit for
// bit on every rank, at every limit, and each rank's gradient is reduced
// once, whole, by its hook or by grad_sync_func. Deferring every
// microbatch keeps the last stage's inputs until the flush: its peak of
// activation bytes rises, which shows the work did move.
func TestDeferEmbeddingWgradMatchesOneFOneB(t *testing.T) {
	for _, p := range []int{2, 4} {
		for _, gs := range []bool{false, true} {
			want, peaks := runSplitPipeline(t, p, 5, "", toyOpts{gradSync: gs})
			for _, limit := range []int{0, 1, 3} {
				got, deferred := runSplitPipeline(t, p, 5, "", toyOpts{defers: true, deferLimit: limit, gradSync: gs})
				for r := range want {
					numtest.SameBits(t, fmt.Sprintf("pp %d, grad_sync_func %v, limit %d, rank %d", p, gs, limit, r), got[r], want[r])
				}
				if limit == 0 && deferred[p-1] <= peaks[p-1] {
					t.Errorf("pp %d, grad_sync_func %v: the last stage's peak %d with every microbatch deferred is not above 1F1B's %d", p, gs, deferred[p-1], peaks[p-1])
				}
			}
		}
	}
}
