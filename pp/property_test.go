package pp

import (
	"fmt"
	"testing"
)

// propertyConfigs lists the configurations the property test runs:
// P ∈ {1, 2, 4, 8}, V ∈ {unset, 1, 2, 4}, M ∈ [P, 4P] (from 1 without
// interleaving), every valid G, forward-only both ways and, for the
// interleaved schedule, four variants (no overlap; overlap; overlap with
// the warmup flush when V > 1; overlap with deallocate_pipeline_outputs),
// with grad_sync_func and param_sync_func set on some of them. With short
// it keeps the first three and the last valid G.
func propertyConfigs(short bool) []Config {
	var out []Config
	for _, p := range []int{1, 2, 4, 8} {
		for _, v := range []int{0, 1, 2, 4} {
			if p == 1 && v > 0 {
				continue
			}
			// 1F1B also runs fewer microbatches than stages.
			mStart := p
			if v == 0 {
				mStart = 1
			}
			for m := mStart; m <= 4*p; m++ {
				groups := []int{0}
				if p > 1 && v > 0 {
					groups = ValidGroupSizes(p, m)
				}
				for gi, g := range groups {
					if short && gi > 2 && gi < len(groups)-1 {
						continue
					}
					for _, fo := range []bool{false, true} {
						base := Config{PP: p, VPP: v, Microbatches: m, GroupSize: g, ForwardOnly: fo}
						if p == 1 || v == 0 {
							out = append(out, base)
							c := base
							c.GradSyncFunc = true
							out = append(out, c)
							continue
						}
						for variant := range 4 {
							c := base
							c.OverlapP2PComm = variant >= 1
							c.OverlapP2PCommWarmupFlush = variant == 2 && v > 1
							c.DeallocatePipelineOutputs = variant == 3
							c.GradSyncFunc = (m+g+variant)%2 == 0
							c.ParamSyncFunc = (m+variant)%3 != 0
							out = append(out, c)
						}
					}
				}
			}
		}
	}
	return out
}

func TestPropertiesAllSchedules(t *testing.T) {
	cfgs := propertyConfigs(testing.Short())
	for _, cfg := range cfgs {
		name := fmt.Sprintf("%+v", cfg)
		ss, err := BuildAll(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := Verify(ss)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.PP == 2 {
			// Two stages: next and previous are one peer, and comm
			// matches their messages in one queue.
			if _, err := VerifyWith(ss, VerifyOptions{SharedPairFIFO: true}); err != nil {
				t.Fatalf("%s, one queue per pair: %v", name, err)
			}
		}
		checkOrders(t, name, cfg, ss)
		checkPeaks(t, name, cfg, ss, res)
	}
	t.Logf("%d configurations verified", len(cfgs))
}

// checkOrders checks each rank's signed order: 2·M·V entries (M·V when
// forward-only), never more backwards than forwards of a chunk so far,
// each backward after its forward, and, for training, the order
// ConvertScheduleTableToOrder gives from the table and the warmup count.
func checkOrders(t *testing.T, name string, cfg Config, ss []*Schedule) {
	t.Helper()
	for _, s := range ss {
		v, m := s.VPP, s.Microbatches
		want := 2 * m * v
		if s.ForwardOnly {
			want = m * v
		}
		if len(s.Order) != want {
			t.Fatalf("%s rank %d: order length %d, want %d", name, s.Rank, len(s.Order), want)
		}
		fwd, bwd := make([]int, v), make([]int, v)
		for i, x := range s.Order {
			switch {
			case x > 0:
				fwd[x-1]++
			case x < 0:
				c := -x - 1
				bwd[c]++
				if bwd[c] > fwd[c] {
					t.Fatalf("%s rank %d: order %v: backward of chunk %d at %d before its forward", name, s.Rank, s.Order, c, i)
				}
			default:
				t.Fatalf("%s rank %d: 0 in order", name, s.Rank)
			}
		}
		seen := map[mc]bool{}
		for _, a := range s.Compute() {
			x := mc{a.Microbatch, a.Chunk}
			if a.Kind == Backward && !seen[x] {
				t.Fatalf("%s rank %d: %v before its forward", name, s.Rank, a)
			}
			seen[x] = true
		}
		if s.ForwardOnly {
			continue
		}
		table := GetScheduleTable(m, v, s.GroupSize)
		ref := ConvertScheduleTableToOrder(s.Warmup, v, table)
		if fmt.Sprint(ref) != fmt.Sprint(s.Order) {
			t.Fatalf("%s rank %d: order\n%v, ConvertScheduleTableToOrder gives\n%v", name, s.Rank, s.Order, ref)
		}
	}
}

// checkPeaks checks the live activations: min(P−r, M) exactly under 1F1B
// (M under no pipelining's one at a time: 1), at most W+1 (≤ M·V) under the
// interleaved schedule, 0 forward-only.
func checkPeaks(t *testing.T, name string, cfg Config, ss []*Schedule, res *VerifyResult) {
	t.Helper()
	for r, s := range ss {
		got := res.PeakLive[r]
		var want int
		switch {
		case s.ForwardOnly:
			want = 0
		case s.Name == NameNoPipelining:
			want = 1
		case s.Name == NameOneFOneB:
			want = min(s.PP-r, s.Microbatches)
		default:
			want = min(s.Warmup+1, s.Microbatches*s.VPP)
			if got > want {
				t.Fatalf("%s rank %d: peak live %d > warmup %d + 1", name, r, got, s.Warmup)
			}
			continue
		}
		if got != want {
			t.Fatalf("%s rank %d: peak live %d, want %d", name, r, got, want)
		}
	}
}

// TestPropertiesInvalid checks that Build refuses exactly the group sizes
// and microbatch counts the interleaved rules refuse, on every rank.
func TestPropertiesInvalid(t *testing.T) {
	for _, p := range []int{2, 4, 8} {
		for _, v := range []int{1, 2, 4} {
			for m := 1; m <= 4*p; m++ {
				for g := 1; g <= m+2; g++ {
					valid := g >= p && g <= m && (m%g == 0 || m%g >= p)
					for r := range p {
						cfg := Config{PP: p, Rank: r, VPP: v, Microbatches: m, GroupSize: g, OverlapP2PComm: true}
						_, err := Build(cfg)
						if valid != (err == nil) {
							t.Fatalf("%+v: valid %v, error %v", cfg, valid, err)
						}
					}
				}
			}
		}
		// The non-interleaved schedule takes any M ≥ 1 but no overlap.
		if _, err := Build(Config{PP: p, Microbatches: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := Build(Config{PP: p, Microbatches: 4, OverlapP2PComm: true}); err == nil {
			t.Fatalf("P %d: overlap without interleaving accepted", p)
		}
	}
}
