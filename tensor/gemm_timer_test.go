package tensor

import (
	"testing"
	"time"
)

func TestTimeGemmsRecordsEachShape(t *testing.T) {
	a, b := New(64, 32), New(48, 32)
	c, d := New(64, 48), New(32, 32)
	stop, ok := TimeGemms()
	if !ok {
		t.Fatal("TimeGemms: a timer already runs")
	}
	if _, ok := TimeGemms(); ok {
		t.Fatal("a second TimeGemms started while the first ran")
	}
	for range 3 {
		GemmParallel(2, false, true, 1, a, b, 0, c) // 64×48×32, NT
	}
	Gemm(true, false, 1, a, a, 0, d) // 32×32×64, TN
	got := stop()
	Gemm(true, false, 1, a, a, 0, d) // after stop: not recorded
	want := []struct {
		s       GemmShape
		threads int
		calls   int
	}{
		{GemmShape{64, 48, 32, false, true}, gemmWorkers(2, 2*64*48*32), 3},
		{GemmShape{32, 32, 64, true, false}, 1, 1},
	}
	if len(got) != len(want) {
		t.Fatalf("recorded %d shapes %+v, want %d", len(got), got, len(want))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if g.GemmShape == w.s {
				found = true
				if g.Calls != w.calls || g.Threads != w.threads || g.Time <= 0 {
					t.Errorf("%+v: calls %d threads %d time %v, want %d calls on %d thread(s), time > 0", w.s, g.Calls, g.Threads, g.Time, w.calls, w.threads)
				}
			}
		}
		if !found {
			t.Errorf("shape %+v not recorded: %+v", w.s, got)
		}
	}
	if got[0].Time < got[1].Time {
		t.Errorf("times not longest first: %v then %v", got[0].Time, got[1].Time)
	}
	again, ok := TimeGemms()
	if !ok {
		t.Fatal("TimeGemms refused after the timer stopped")
	}
	if g := again(); len(g) != 0 {
		t.Errorf("a new timer starts with %+v, want nothing", g)
	}
}

func TestGemmTimeGFLOPs(t *testing.T) {
	g := GemmTime{GemmShape: GemmShape{M: 1000, N: 1000, K: 500}, Calls: 4, Time: time.Second}
	if r := g.GFLOPs(); r != 4 { // 4 × 2·1000·1000·500 FLOP in 1 s
		t.Errorf("GFLOPs = %v, want 4", r)
	}
	if r := (GemmTime{Calls: 1}).GFLOPs(); r != 0 {
		t.Errorf("GFLOPs with no time = %v, want 0", r)
	}
}
