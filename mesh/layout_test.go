package mesh

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/config"
)

func mustBuild(t *testing.T, s Sizes) *Layout {
	t.Helper()
	l, err := Build(s)
	if err != nil {
		t.Fatalf("Build(%+v): %v", s, err)
	}
	return l
}

// The worked example of docs/SEMANTICS.md § Rank groups through Build:
// world 16, tp 2, pp 2 (dp 4).
func TestBuildWorld16TP2PP2(t *testing.T) {
	l := mustBuild(t, Sizes{World: 16, TP: 2, PP: 2})
	d := l.Sizes()
	if d.DP != 4 || d.EDP != 4 || d.ETP != 2 || d.CP != 1 || d.EP != 1 || d.NumDistOptInstances != 1 || d.Order != DefaultOrder {
		t.Errorf("Sizes() = %+v, want DP 4, EDP 4, ETP 2, CP 1, EP 1, one instance, the default order", d)
	}
	dp := [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}
	pp := [][]int{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}
	tp := [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}
	want := map[string][][]int{
		GroupTP:     tp,
		GroupDP:     dp,
		GroupDPCP:   dp,
		GroupPP:     pp,
		GroupCP:     singletons(16),
		GroupMP:     {{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}},
		GroupTPDP:   {seq(0, 7), seq(8, 15)},
		GroupTPDPCP: {seq(0, 7), seq(8, 15)},
		GroupTPCP:   tp, // cp = 1
		// The embedding group of each pp group is its first and last stage, here both.
		GroupEmbd:    pp,
		GroupPosEmbd: {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}},
		// One optimizer instance: intra-dp-cp is dp-cp, intra-dist-opt the whole world.
		GroupIntraDPCP:    dp,
		GroupIntraDistOpt: {{0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15}}, // the tp-ep-pp groups, concatenated
		// The expert grid with ep = 1, etp = tp is the dense grid without cp.
		GroupExptTP:      tp,
		GroupEP:          singletons(16),
		GroupExptDP:      dp,
		GroupTPEP:        tp,
		GroupTPEPPP:      {{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}},
		GroupIntraExptDP: dp,
	}
	for name, w := range want {
		checkGroups(t, name, l.Groups(name), w)
	}
	if got := l.Groups(GroupInterDistOpt); got != nil {
		t.Errorf("inter-dist-opt with one instance = %v, want none (Megatron builds it only for several instances)", got)
	}
	if names := l.Names(); len(names) != len(want) {
		t.Errorf("Names() = %v: %d kinds, want %d", names, len(names), len(want))
	}

	// Rank 5 is tp 1, dp 2, pp 0; its P2P next and prev are both 13 (the ring wraps).
	c, err := l.Coords(5)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Coords{TP: 1, DP: 2, ETP: 1, EDP: 2}); c != want {
		t.Errorf("Coords(5) = %+v, want %+v", c, want)
	}
	for name, f := range map[string]func(int) (int, error){"next": l.PipelineNextRank, "prev": l.PipelinePrevRank} {
		if r, err := f(5); err != nil || r != 13 {
			t.Errorf("pipeline %s of rank 5 = %d, %v; want 13", name, r, err)
		}
	}
	members, idx := l.GroupOf(GroupDP, 5)
	if !reflect.DeepEqual(members, []int{1, 3, 5, 7}) || idx != 2 {
		t.Errorf("GroupOf(dp, 5) = %v, %d; want [1 3 5 7], 2", members, idx)
	}
}

// The pipeline ring on four stages: world 8, pp 4, tp 2.
func TestPipelineRing(t *testing.T) {
	l := mustBuild(t, Sizes{World: 8, TP: 2, PP: 4})
	// rank = tp + 2·pp: the pp group of rank 1 is [1 3 5 7].
	next := map[int]int{1: 3, 3: 5, 5: 7, 7: 1}
	prev := map[int]int{1: 7, 3: 1, 5: 3, 7: 5}
	for r, w := range next {
		if got, err := l.PipelineNextRank(r); err != nil || got != w {
			t.Errorf("PipelineNextRank(%d) = %d, %v; want %d", r, got, err, w)
		}
		if got, err := l.PipelinePrevRank(r); err != nil || got != prev[r] {
			t.Errorf("PipelinePrevRank(%d) = %d, %v; want %d", r, got, err, prev[r])
		}
	}
	checkGroups(t, "embd", l.Groups(GroupEmbd), [][]int{{0, 6}, {1, 7}})
	checkGroups(t, "pos-embd", l.Groups(GroupPosEmbd), [][]int{{0}, {1}})
	if m, i := l.GroupOf(GroupEmbd, 3); m != nil || i != -1 {
		t.Errorf("GroupOf(embd, 3) = %v, %d; a middle stage has no embedding group", m, i)
	}
	// Under the V placement each pipeline's rank 0 holds the first and the
	// last stage: the word-embedding group is that rank alone.
	v := mustBuild(t, Sizes{World: 8, TP: 2, PP: 4, Placement: config.PlacementV})
	checkGroups(t, "embd under the V", v.Groups(GroupEmbd), [][]int{{0}, {1}})
	// With multi-token prediction the stages holding a copy of the word
	// embedding are given: here the first, an MTP stage and the last.
	mtp := mustBuild(t, Sizes{World: 8, TP: 2, PP: 4, EmbeddingStages: []int{0, 2, 3}})
	checkGroups(t, "embd with an MTP stage", mtp.Groups(GroupEmbd), [][]int{{0, 4, 6}, {1, 5, 7}})
	for _, bad := range [][]int{{0, 4}, {2, 1}, {-1}, {1, 1}} {
		if _, err := Build(Sizes{World: 8, TP: 2, PP: 4, EmbeddingStages: bad}); err == nil || !strings.Contains(err.Error(), "want ascending pipeline ranks in [0, 4)") {
			t.Errorf("EmbeddingStages %v: error %v", bad, err)
		}
	}
	if _, err := l.PipelineNextRank(8); err == nil || !strings.Contains(err.Error(), "rank 8 is outside the world [0, 8)") {
		t.Errorf("PipelineNextRank(8) error = %v", err)
	}
	if _, err := l.Coords(-1); err == nil {
		t.Error("Coords(-1): no error")
	}
	if m, i := l.GroupOf("nope", 0); m != nil || i != -1 {
		t.Errorf("GroupOf(unknown kind) = %v, %d", m, i)
	}
	if m, i := l.GroupOf(GroupTP, 8); m != nil || i != -1 {
		t.Errorf("GroupOf(tp, 8) = %v, %d", m, i)
	}
}

// The EP examples of docs/SEMANTICS.md § Rank groups through Build
// (world 16, pp 2).
func TestBuildEP(t *testing.T) {
	l := mustBuild(t, Sizes{World: 16, TP: 2, PP: 2, EP: 2})
	if d := l.Sizes(); d.EDP != 2 || d.DP != 4 {
		t.Errorf("DP, EDP = %d, %d; want 4, 2", d.DP, d.EDP)
	}
	checkGroups(t, "expt-tp", l.Groups(GroupExptTP), [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}})
	checkGroups(t, "ep", l.Groups(GroupEP), [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}})
	checkGroups(t, "expt-dp", l.Groups(GroupExptDP), [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}})
	checkGroups(t, "tp-ep", l.Groups(GroupTPEP), [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}})
	checkGroups(t, "tp-ep-pp", l.Groups(GroupTPEPPP), [][]int{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}})
	checkGroups(t, "pp", l.Groups(GroupPP), [][]int{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}})
	// Expert rank = etp + 2·ep + 4·edp + 8·pp; dense rank = tp + 2·dp + 8·pp.
	c, _ := l.Coords(13)
	if want := (Coords{TP: 1, DP: 2, PP: 1, ETP: 1, EP: 0, EDP: 1}); c != want {
		t.Errorf("Coords(13) = %+v, want %+v", c, want)
	}

	l = mustBuild(t, Sizes{World: 16, PP: 2, EP: 4, ETP: 1, TP: 2})
	checkGroups(t, "ep (ep 4, etp 1)", l.Groups(GroupEP), [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}})
	checkGroups(t, "expt-dp (ep 4, etp 1)", l.Groups(GroupExptDP), [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}})
	checkGroups(t, "expt-tp (etp 1)", l.Groups(GroupExptTP), singletons(16))
}

// The CP example of docs/SEMANTICS.md § Rank groups through Build: world 16,
// tp 2, cp 2, pp 2 (dp 2).
func TestBuildCP(t *testing.T) {
	l := mustBuild(t, Sizes{World: 16, TP: 2, CP: 2, PP: 2})
	checkGroups(t, "cp", l.Groups(GroupCP), [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}})
	checkGroups(t, "dp", l.Groups(GroupDP), [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}})
	checkGroups(t, "dp-cp", l.Groups(GroupDPCP), [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}})
	checkGroups(t, "tp-cp", l.Groups(GroupTPCP), [][]int{seq(0, 3), seq(4, 7), seq(8, 11), seq(12, 15)})
	// The expert grid has no cp: edp = 16/(2·1·2) = 4, expert rank = etp + 2·edp + 8·pp.
	checkGroups(t, "expt-dp (cp folded into edp)", l.Groups(GroupExptDP), [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}})
	c, _ := l.Coords(6)
	if want := (Coords{TP: 0, CP: 1, DP: 1, PP: 0, ETP: 0, EDP: 3}); c != want {
		t.Errorf("Coords(6) = %+v, want %+v", c, want)
	}
}

// The other orders of docs/SEMANTICS.md § Rank groups through Build.
func TestBuildOtherOrders(t *testing.T) {
	l := mustBuild(t, Sizes{World: 8, TP: 2, PP: 2, Order: "tp-pp-dp"})
	checkGroups(t, "dp of tp-pp-dp", l.Groups(GroupDP), [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}})
	checkGroups(t, "pp of tp-pp-dp", l.Groups(GroupPP), [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}})
	if got, err := l.PipelineNextRank(4); err != nil || got != 6 {
		t.Errorf("PipelineNextRank(4) under tp-pp-dp = %d, %v; want 6", got, err)
	}

	l = mustBuild(t, Sizes{World: 16, TP: 2, PP: 2, Order: "tp-cp-pp-ep-dp"})
	checkGroups(t, "dp of tp-cp-pp-ep-dp", l.Groups(GroupDP), [][]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}})
	checkGroups(t, "pp of tp-cp-pp-ep-dp", l.Groups(GroupPP), [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}})
}

// Partial distributed optimizer, worked by hand: world 8, ep 2, two instances.
// Dense rank = dp (dp 8); expert rank = ep + 2·edp (edp 4).
func TestBuildDistOptInstances(t *testing.T) {
	l := mustBuild(t, Sizes{World: 8, EP: 2, NumDistOptInstances: 2})
	want := map[string][][]int{
		GroupDPCP:         {seq(0, 7)},
		GroupIntraDPCP:    {seq(0, 3), seq(4, 7)},
		GroupExptDP:       {{0, 2, 4, 6}, {1, 3, 5, 7}},
		GroupIntraExptDP:  {{0, 2}, {4, 6}, {1, 3}, {5, 7}},
		GroupInterDistOpt: {{0, 4}, {2, 6}, {1, 5}, {3, 7}},
		GroupTPEPPP:       {{0, 1}, {2, 3}, {4, 5}, {6, 7}},
		GroupIntraDistOpt: {seq(0, 3), seq(4, 7)},
	}
	for name, w := range want {
		checkGroups(t, name, l.Groups(name), w)
	}
	if !slices.Contains(l.Names(), GroupInterDistOpt) {
		t.Errorf("Names() = %v lacks inter-dist-opt", l.Names())
	}

	// With cp the dp-cp group is cut: world 16, tp 2, cp 2 (dp 4), four instances.
	// Dense rank = tp + 2·cp + 4·dp; dp-cp groups [0 2 4 6 8 10 12 14] and [1 3 … 15].
	l = mustBuild(t, Sizes{World: 16, TP: 2, CP: 2, NumDistOptInstances: 4})
	checkGroups(t, "intra-dp-cp", l.Groups(GroupIntraDPCP), [][]int{{0, 2}, {4, 6}, {8, 10}, {12, 14}, {1, 3}, {5, 7}, {9, 11}, {13, 15}})
	// Expert grid: rank = etp + 2·edp (edp 8), so expt-dp is the same as dp-cp.
	checkGroups(t, "inter-dist-opt", l.Groups(GroupInterDistOpt), [][]int{{0, 4, 8, 12}, {2, 6, 10, 14}, {1, 5, 9, 13}, {3, 7, 11, 15}})
	checkGroups(t, "intra-dist-opt", l.Groups(GroupIntraDistOpt), [][]int{seq(0, 3), seq(4, 7), seq(8, 11), seq(12, 15)})
}

// The reference's order tests (tests/unit_tests/test_parallel_state.py), world 8.
func TestOrderConsistencyReferenceCases(t *testing.T) {
	same := []Sizes{
		{TP: 1, PP: 8, EP: 1}, {TP: 2, PP: 4, EP: 1}, {TP: 4, PP: 2, EP: 1}, {TP: 8, PP: 1, EP: 1},
		{TP: 4, PP: 1, EP: 2}, {TP: 1, PP: 1, EP: 8}, {TP: 1, PP: 1, EP: 2}, {TP: 2, PP: 1, EP: 4},
	}
	for _, s := range same {
		s.World = 8
		a, b := buildOrders(t, s)
		for _, name := range []string{GroupTP, GroupDP, GroupPP, GroupExptDP, GroupCP, GroupMP, GroupTPEP, GroupTPDP} {
			checkGroups(t, name+" for "+sizesString(s), b.Groups(name), a.Groups(name))
		}
	}
	differ := []Sizes{{TP: 1, PP: 2}, {TP: 1, PP: 4}, {TP: 2, PP: 2}}
	for _, s := range differ {
		s.World = 8
		a, b := buildOrders(t, s)
		for _, name := range []string{GroupTP, GroupCP} {
			checkGroups(t, name+" for "+sizesString(s), b.Groups(name), a.Groups(name))
		}
		for _, name := range []string{GroupDP, GroupPP, GroupMP} {
			if reflect.DeepEqual(a.Groups(name), b.Groups(name)) {
				t.Errorf("%s for %s: orders tp-ep-dp-pp and tp-pp-ep-dp agree (%v), want them to differ", name, sizesString(s), a.Groups(name))
			}
		}
	}
	// With ep 2 the same sizes give edp ≠ dp, which an order not ending with pp rejects.
	for _, s := range []Sizes{{TP: 1, PP: 2, EP: 2}, {TP: 1, PP: 4, EP: 2}, {TP: 2, PP: 2, EP: 2}} {
		s.World = 8
		s.Order = "tp-pp-ep-dp"
		if _, err := Build(s); err == nil || !strings.Contains(err.Error(), "does not end with pp") {
			t.Errorf("Build(%s): error %v, want the edp = dp rule", sizesString(s), err)
		}
	}
}

func buildOrders(t *testing.T, s Sizes) (*Layout, *Layout) {
	t.Helper()
	s.Order = "tp-ep-dp-pp"
	a := mustBuild(t, s)
	s.Order = "tp-pp-ep-dp"
	return a, mustBuild(t, s)
}

func sizesString(s Sizes) string {
	return fmt.Sprintf("world=%d tp=%d pp=%d cp=%d ep=%d etp=%d instances=%d order=%q",
		s.World, s.TP, s.PP, s.CP, s.EP, s.ETP, s.NumDistOptInstances, s.Order)
}

// allSizes enumerates the sizes with tp, pp, cp, ep, etp, instances ∈ {1, 2, 4} (and 3
// for tp, pp) that Build accepts for the given world and order.
func allSizes(t *testing.T, world int, order string) []*Layout {
	var out []*Layout
	for _, tp := range []int{1, 2, 3, 4} {
		for _, pp := range []int{1, 2, 3, 4} {
			for _, cp := range []int{1, 2, 4} {
				for _, ep := range []int{1, 2, 4} {
					for _, etp := range []int{0, 1, 2} {
						for _, n := range []int{1, 2} {
							l, err := Build(Sizes{World: world, TP: tp, PP: pp, CP: cp, EP: ep, ETP: etp, NumDistOptInstances: n, Order: order})
							if err == nil {
								out = append(out, l)
							}
						}
					}
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("world %d order %s: only %d valid layouts", world, order, len(out))
	}
	return out
}

// Every group kind except the embedding ones partitions the world into equal groups of
// the expected size, a rank's position in its groups agrees with Coords, and the
// embedding groups are the ends of the pp groups.
func TestEveryKindPartitionsTheWorld(t *testing.T) {
	for _, world := range []int{8, 12, 16} {
		for _, order := range []string{DefaultOrder, "tp-cp-pp-ep-dp", "pp-dp-ep-cp-tp"} {
			for _, l := range allSizes(t, world, order) {
				checkPartitions(t, l)
			}
		}
	}
}

func checkPartitions(t *testing.T, l *Layout) {
	t.Helper()
	d := l.Sizes()
	n := d.NumDistOptInstances
	wantSize := map[string]int{
		GroupTP: d.TP, GroupCP: d.CP, GroupDP: d.DP, GroupPP: d.PP, GroupDPCP: d.DP * d.CP,
		GroupTPCP: d.TP * d.CP, GroupTPDP: d.TP * d.DP, GroupTPDPCP: d.TP * d.DP * d.CP, GroupMP: d.TP * d.PP,
		GroupIntraDPCP: d.DP * d.CP / n,
		GroupExptTP:    d.ETP, GroupEP: d.EP, GroupExptDP: d.EDP, GroupTPEP: d.ETP * d.EP, GroupTPEPPP: d.ETP * d.EP * d.PP,
		GroupIntraExptDP: d.EDP / n, GroupInterDistOpt: n, GroupIntraDistOpt: d.World / n,
	}
	what := func() string { return fmt.Sprintf("%s (dp %d, edp %d)", sizesString(d.Sizes), d.DP, d.EDP) }
	for _, name := range l.Names() {
		if name == GroupEmbd || name == GroupPosEmbd {
			continue
		}
		size, ok := wantSize[name]
		if !ok {
			t.Fatalf("%s: unexpected kind %q", what(), name)
		}
		seen := make([]int, d.World)
		for _, g := range l.Groups(name) {
			if len(g) != size {
				t.Fatalf("%s: %s group %v has %d ranks, want %d", what(), name, g, len(g), size)
			}
			for _, r := range g {
				seen[r]++
			}
		}
		for r, c := range seen {
			if c != 1 {
				t.Fatalf("%s: rank %d is in %d %s groups, want 1", what(), r, c, name)
			}
		}
	}
	for r := range d.World {
		c, err := l.Coords(r)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]int{GroupTP: c.TP, GroupCP: c.CP, GroupDP: c.DP, GroupPP: c.PP, GroupEP: c.EP, GroupExptTP: c.ETP, GroupExptDP: c.EDP} {
			if _, idx := l.GroupOf(name, r); idx != want {
				t.Fatalf("%s: rank %d is at %d in its %s group, but Coords says %d", what(), r, idx, name, want)
			}
		}
	}
	pp := l.Groups(GroupPP)
	embd, pos := l.Groups(GroupEmbd), l.Groups(GroupPosEmbd)
	for i, g := range pp {
		wantE := []int{g[0], g[len(g)-1]}
		if len(g) == 1 {
			wantE = g
		}
		if !reflect.DeepEqual(embd[i], wantE) || !reflect.DeepEqual(pos[i], g[:1]) {
			t.Fatalf("%s: pp group %v has embd %v, pos-embd %v", what(), g, embd[i], pos[i])
		}
	}
}

// Orders tp-ep-dp-pp and tp-pp-ep-dp give identical groups when pp = 1 or dp = 1 and
// different dp, pp and model-parallel groups otherwise; when tp-pp-ep-dp is rejected it is
// for the edp = dp rule.
func TestOrderConsistencyProperty(t *testing.T) {
	checked := 0
	for _, world := range []int{8, 16} {
		for _, l := range allSizes(t, world, "tp-ep-dp-pp") {
			s := l.Sizes().Sizes
			d := l.Sizes()
			s.Order = "tp-pp-ep-dp"
			m, err := Build(s)
			// Under tp-pp-ep-dp the pp stride is tp on the dense grid and etp on the
			// expert grid, and the two data-parallel sizes must agree.
			edpRule, ppRule := d.PP > 1 && d.DP != d.EDP, d.PP > 1 && d.TP != d.ETP
			if (err != nil) != (edpRule || ppRule) {
				t.Fatalf("%s: error %v, want one: %v", sizesString(s), err, edpRule || ppRule)
			}
			if err != nil {
				if edpRule != strings.Contains(err.Error(), "does not end with pp") ||
					ppRule != strings.Contains(err.Error(), "pipeline groups of the dense grid") {
					t.Fatalf("%s: error %v, want edp rule %v, pp rule %v", sizesString(s), err, edpRule, ppRule)
				}
				continue
			}
			checked++
			if d.PP == 1 || d.DP == 1 {
				for _, name := range l.Names() {
					checkGroups(t, name+" for "+sizesString(s), m.Groups(name), l.Groups(name))
				}
				continue
			}
			for _, name := range []string{GroupDP, GroupPP, GroupMP} {
				if reflect.DeepEqual(l.Groups(name), m.Groups(name)) {
					t.Errorf("%s: %s groups agree for both orders, want them to differ", sizesString(s), name)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d size sets compared", checked)
	}
}

func TestGroupsReturnsCopies(t *testing.T) {
	l := mustBuild(t, Sizes{World: 4, TP: 2})
	g := l.Groups(GroupTP)
	g[0][0] = 99
	m, _ := l.GroupOf(GroupTP, 1)
	m[0] = 98
	n := l.Names()
	n[0] = "x"
	checkGroups(t, "tp after mutating copies", l.Groups(GroupTP), [][]int{{0, 1}, {2, 3}})
	if l.Names()[0] != GroupTP {
		t.Errorf("Names()[0] = %q after mutating a copy", l.Names()[0])
	}
}

func TestNamesFollowGroupKinds(t *testing.T) {
	l := mustBuild(t, Sizes{World: 8, EP: 2, NumDistOptInstances: 2})
	var kinds []string
	for _, k := range GroupKinds() {
		kinds = append(kinds, k.Name)
	}
	if !reflect.DeepEqual(l.Names(), kinds) {
		t.Errorf("Names() = %v, want every kind in GroupKinds order %v", l.Names(), kinds)
	}
}
