package pp

import (
	"slices"
	"strings"
	"testing"
)

// kinds lists the schedule's actions of the given kinds, as strings.
func actionsOf(s *Schedule, ks ...Kind) []string {
	var out []string
	for _, a := range s.Actions {
		if slices.Contains(ks, a.Kind) {
			out = append(out, a.String())
		}
	}
	return out
}

// TestGradSyncFirstStage is the reference's
// test_schedule_enables_grad_sync_on_first_stage: one microbatch on the
// first stage with grad_sync_func set, one or two stages; no_sync is left
// before the backward, and grad_sync_func is not called.
func TestGradSyncFirstStage(t *testing.T) {
	want := []string{"no_sync", "sync", "B(m0,c0)"}
	for _, pp := range []int{1, 2} {
		s := WithoutInterleaving(pp, 0, 1, false, true)
		if got := actionsOf(s, DisableGradSync, EnableGradSync, Backward, GradSync); !slices.Equal(got, want) {
			t.Errorf("pp %d: %v, want %v", pp, got, want)
		}
	}
	if got := actionsOf(NoPipelining(1, false), DisableGradSync, EnableGradSync, Backward); !slices.Equal(got, want) {
		t.Errorf("no pipelining: %v, want %v", got, want)
	}
}

// TestOneFOneBGradSync checks where the other stages leave no_sync: before
// their last backward without grad_sync_func; after the loops, with one
// grad_sync_func call, with it.
func TestOneFOneBGradSync(t *testing.T) {
	s := WithoutInterleaving(4, 2, 6, false, false)
	got := actionsOf(s, EnableGradSync, Backward, GradSync)
	if got[len(got)-2] != "sync" || got[len(got)-1] != "B(m5,c0)" {
		t.Errorf("without grad_sync_func: %v", got)
	}
	s = WithoutInterleaving(4, 2, 6, false, true)
	got = actionsOf(s, EnableGradSync, Backward, GradSync)
	if tail := got[len(got)-3:]; !slices.Equal(tail, []string{"B(m5,c0)", "sync", "grad_sync(c0)"}) {
		t.Errorf("with grad_sync_func: %v", got)
	}
	// Forward-only never leaves no_sync, as in the reference.
	s = WithoutInterleaving(4, 1, 6, true, false)
	if got := actionsOf(s, DisableGradSync, EnableGradSync, Backward); !slices.Equal(got, []string{"no_sync"}) {
		t.Errorf("forward only: %v", got)
	}
}

// TestOneFOneBEndsOmitNoOps checks that calls which are no-ops on the
// first and last stage leave no action.
func TestOneFOneBEndsOmitNoOps(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 3, Microbatches: 5})
	for _, a := range ss[0].Actions {
		for _, o := range a.Ops {
			if o.Dir == RecvPrev || o.Dir == SendPrev {
				t.Errorf("rank 0 has %v", a)
			}
		}
	}
	for _, a := range ss[2].Actions {
		for _, o := range a.Ops {
			if o.Dir == SendNext || o.Dir == RecvNext {
				t.Errorf("last rank has %v", a)
			}
		}
	}
	if c := ss[1].Actions[1]; c.Call != "recv_forward" || len(c.Ops) != 1 || c.Ops[0] != (Op{Dir: RecvPrev}) {
		t.Errorf("rank 1 starts with %v", c)
	}
}

// TestInterleavedSync checks the interleaved grad and param syncs: each
// chunk's last-microbatch backward runs outside no_sync (default), or
// grad_sync is called once per chunk; param_sync runs once per chunk
// before its first forward (Verify checks the order).
func TestInterleavedSync(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 2, VPP: 4, Microbatches: 4, OverlapP2PComm: true})
	got := actionsOf(ss[0], EnableGradSync, Backward)
	var synced []string
	for i, k := range got {
		if k == "sync" && i+1 < len(got) {
			synced = append(synced, got[i+1])
		}
	}
	if want := []string{"B(m3,c3)", "B(m3,c2)", "B(m3,c1)", "B(m3,c0)"}; !slices.Equal(synced, want) {
		t.Errorf("backwards outside no_sync %v, want %v", synced, want)
	}
	ss = mustBuildAll(t, Config{PP: 2, VPP: 4, Microbatches: 4, OverlapP2PComm: true, GradSyncFunc: true, ParamSyncFunc: true})
	for r, s := range ss {
		gs := actionsOf(s, GradSync)
		slices.Sort(gs)
		if want := []string{"grad_sync(c0)", "grad_sync(c1)", "grad_sync(c2)", "grad_sync(c3)"}; !slices.Equal(gs, want) {
			t.Errorf("rank %d: %v", r, gs)
		}
		if ps := actionsOf(s, ParamSync); len(ps) != 4 || ps[0] != "param_sync(c0)" || ps[1] != "param_sync(c1)" {
			t.Errorf("rank %d: %v", r, ps)
		}
	}
	// Forward-only runs no syncs.
	ss = mustBuildAll(t, Config{PP: 2, VPP: 4, Microbatches: 4, OverlapP2PComm: true, ForwardOnly: true, GradSyncFunc: true, ParamSyncFunc: true})
	if got := actionsOf(ss[0], GradSync, ParamSync, EnableGradSync); len(got) != 0 {
		t.Errorf("forward only: %v", got)
	}
}

func TestBuildChooses(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		name string
	}{
		{Config{PP: 1, Microbatches: 2}, NameNoPipelining},
		{Config{PP: 2, Microbatches: 2}, NameOneFOneB},
		{Config{PP: 2, VPP: 1, Microbatches: 2}, NameInterleaved},
		{Config{PP: 3, VPP: 2, Microbatches: 3}, NameInterleaved},
	} {
		s, err := Build(c.cfg)
		if err != nil || s.Name != c.name {
			t.Errorf("%+v: %v, %v; want %s", c.cfg, s, err, c.name)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{PP: 0, Microbatches: 2}, "pipeline_model_parallel_size = 0"},
		{Config{PP: 2, Rank: 2, Microbatches: 2}, "rank 2"},
		{Config{PP: 2, Microbatches: 0}, "--num-microbatches"},
		{Config{PP: 1, VPP: 2, Microbatches: 2}, "needs pipeline_model_parallel_size > 1"},
		{Config{PP: 2, Microbatches: 2, OverlapP2PComm: true}, "non-interleaved"},
		{Config{PP: 2, VPP: 2, Microbatches: 4, OverlapP2PComm: true, BatchP2PComm: true}, "batch_p2p_comm"},
		{Config{PP: 2, VPP: 2, Microbatches: 4, OverlapP2PCommWarmupFlush: true}, "overlap_p2p_comm_warmup_flush"},
		{Config{PP: 2, VPP: 1, Microbatches: 4, OverlapP2PComm: true, OverlapP2PCommWarmupFlush: true}, "virtual_pipeline_model_parallel_size = 1"},
		{Config{PP: 2, VPP: 2, Microbatches: 7, GroupSize: 3}, "7 mod 3 = 1"},
		{Config{PP: 4, VPP: 2, Microbatches: 3}, "num_microbatches = 3 < 4"},
	} {
		_, err := Build(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.cfg, err, c.want)
		}
		if _, err := BuildAll(c.cfg); err == nil && c.cfg.Rank == 0 {
			t.Errorf("%+v: BuildAll accepts it", c.cfg)
		}
	}
}
