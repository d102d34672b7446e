package mesh

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// seq returns [from, from+1, …, to].
func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// singletons returns [[0] [1] … [n-1]].
func singletons(n int) [][]int {
	g := make([][]int, n)
	for i := range g {
		g[i] = []int{i}
	}
	return g
}

func mustGen(t *testing.T, tp, ep, dp, pp, cp int, order string, offset int) *RankGenerator {
	t.Helper()
	g, err := NewRankGenerator(tp, ep, dp, pp, cp, order, offset)
	if err != nil {
		t.Fatalf("NewRankGenerator(tp=%d ep=%d dp=%d pp=%d cp=%d %q): %v", tp, ep, dp, pp, cp, order, err)
	}
	return g
}

func checkGroups(t *testing.T, what string, got, want [][]int) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// The docstring example of generate_masked_orthogonal_rank_groups
// (docs/SEMANTICS.md § Rank groups).
func TestGenerateMaskedOrthogonalRankGroupsDocstring(t *testing.T) {
	got := GenerateMaskedOrthogonalRankGroups(24, []int{2, 3, 4}, []bool{false, true, false})
	want := [][]int{{0, 2, 4}, {1, 3, 5}, {6, 8, 10}, {7, 9, 11}, {12, 14, 16}, {13, 15, 17}, {18, 20, 22}, {19, 21, 23}}
	checkGroups(t, "generate_masked_orthogonal_rank_groups(24, [2,3,4], [F,T,F])", got, want)
}

// The example in the same docstring: order tp-pp-dp, sizes 2-2-2, dp groups.
func TestGenerateMaskedOrthogonalRankGroupsTPPPDP(t *testing.T) {
	got := GenerateMaskedOrthogonalRankGroups(8, []int{2, 2, 2}, []bool{false, false, true})
	checkGroups(t, "dp of tp-pp-dp 2-2-2", got, [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}})
}

// Worked example of docs/SEMANTICS.md § Rank groups: world 16, tp 2, pp 2,
// dp 4, order tp-cp-ep-dp-pp.
func TestRankGeneratorWorld16TP2PP2(t *testing.T) {
	g := mustGen(t, 2, 1, 4, 2, 1, DefaultOrder, 0)
	if g.WorldSize() != 16 {
		t.Fatalf("WorldSize = %d, want 16", g.WorldSize())
	}
	cases := []struct {
		token string
		want  [][]int
	}{
		{"tp", [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}},
		{"dp", [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}},
		{"dp-cp", [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}},
		{"cp-dp", [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}},
		{"pp", [][]int{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}},
		{"cp", singletons(16)},
		{"tp-pp", [][]int{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}}},
		{"pp-tp", [][]int{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}}},
		{"tp-dp", [][]int{seq(0, 7), seq(8, 15)}},
		{"tp-dp-cp", [][]int{seq(0, 7), seq(8, 15)}},
		{"dp-tp-cp", [][]int{seq(0, 7), seq(8, 15)}},
	}
	for _, c := range cases {
		checkGroups(t, c.token, g.GetRanks(c.token), c.want)
	}
	// Rank 5 is tp 1, dp 2, pp 0.
	if got, want := g.Coord(5), (GridCoord{TP: 1, DP: 2}); got != want {
		t.Errorf("Coord(5) = %+v, want %+v", got, want)
	}
	if got := g.Rank(GridCoord{TP: 1, DP: 2}); got != 5 {
		t.Errorf("Rank(tp 1, dp 2, pp 0) = %d, want 5", got)
	}
	// rank = tp + 2·dp + 8·pp.
	for tp := range 2 {
		for dp := range 4 {
			for pp := range 2 {
				c := GridCoord{TP: tp, DP: dp, PP: pp}
				if got, want := g.Rank(c), tp+2*dp+8*pp; got != want {
					t.Errorf("Rank(%+v) = %d, want %d", c, got, want)
				}
			}
		}
	}
}

// The expert grids of docs/SEMANTICS.md § Rank groups: world 16, pp 2.
func TestRankGeneratorExpertExamples(t *testing.T) {
	// ep 2, etp 2, edp 2: rank = etp + 2·ep + 4·edp + 8·pp.
	g := mustGen(t, 2, 2, 2, 2, 1, DefaultOrder, 0)
	checkGroups(t, "expt-tp", g.GetRanks("tp"), [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}})
	checkGroups(t, "ep", g.GetRanks("ep"), [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}})
	checkGroups(t, "expt-dp", g.GetRanks("dp"), [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}})
	checkGroups(t, "tp-ep", g.GetRanks("tp-ep"), [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}})
	checkGroups(t, "tp-ep-pp", g.GetRanks("tp-ep-pp"), [][]int{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}})
	for etp := range 2 {
		for ep := range 2 {
			for edp := range 2 {
				for pp := range 2 {
					c := GridCoord{TP: etp, EP: ep, DP: edp, PP: pp}
					r := etp + 2*ep + 4*edp + 8*pp
					if got := g.Rank(c); got != r {
						t.Errorf("Rank(%+v) = %d, want %d", c, got, r)
					}
					if got := g.Coord(r); got != c {
						t.Errorf("Coord(%d) = %+v, want %+v", r, got, c)
					}
				}
			}
		}
	}

	// ep 4, etp 1, edp 2.
	g = mustGen(t, 1, 4, 2, 2, 1, DefaultOrder, 0)
	checkGroups(t, "ep (ep 4)", g.GetRanks("ep"), [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}})
	checkGroups(t, "expt-dp (ep 4)", g.GetRanks("dp"), [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}})
}

// The CP example of docs/SEMANTICS.md § Rank groups: world 16, tp 2, cp 2,
// pp 2, dp 2.
func TestRankGeneratorCP(t *testing.T) {
	g := mustGen(t, 2, 1, 2, 2, 2, DefaultOrder, 0)
	checkGroups(t, "cp", g.GetRanks("cp"), [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}})
	checkGroups(t, "dp", g.GetRanks("dp"), [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}})
	checkGroups(t, "dp-cp", g.GetRanks("dp-cp"), [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}})
	// rank = tp + 2·cp + 4·dp + 8·pp: tp-cp groups fix dp and pp.
	checkGroups(t, "tp-cp", g.GetRanks("tp-cp"), [][]int{seq(0, 3), seq(4, 7), seq(8, 11), seq(12, 15)})
}

// The other orders of docs/SEMANTICS.md § Rank groups.
func TestRankGeneratorOtherOrders(t *testing.T) {
	g := mustGen(t, 2, 1, 2, 2, 1, "tp-pp-dp", 0)
	checkGroups(t, "dp of tp-pp-dp", g.GetRanks("dp"), [][]int{{0, 4}, {1, 5}, {2, 6}, {3, 7}})
	checkGroups(t, "pp of tp-pp-dp", g.GetRanks("pp"), [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}})
	if got, want := g.Order(), "tp-pp-dp-ep-cp"; got != want {
		t.Errorf("Order() = %q, want %q (size-1 dims appended in Megatron's order)", got, want)
	}

	// tp-cp-pp-ep-dp, world 16, tp 2, pp 2, dp 4: rank = tp + 2·pp + 4·dp.
	g = mustGen(t, 2, 1, 4, 2, 1, "tp-cp-pp-ep-dp", 0)
	checkGroups(t, "dp of tp-cp-pp-ep-dp", g.GetRanks("dp"), [][]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}})
	checkGroups(t, "pp of tp-cp-pp-ep-dp", g.GetRanks("pp"), [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}})

	// Upper case is accepted, as in the reference (it lower-cases the order).
	g = mustGen(t, 2, 1, 4, 2, 1, "TP-CP-PP-EP-DP", 0)
	checkGroups(t, "dp of TP-CP-PP-EP-DP", g.GetRanks("DP"), [][]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}})
}

func TestRankGeneratorOffset(t *testing.T) {
	g := mustGen(t, 2, 1, 2, 1, 1, "tp-dp", 8)
	checkGroups(t, "tp with offset 8", g.GetRanks("tp"), [][]int{{8, 9}, {10, 11}})
	checkGroups(t, "dp with offset 8", g.GetRanks("dp"), [][]int{{8, 10}, {9, 11}})
	if got := g.Rank(GridCoord{TP: 1, DP: 1}); got != 11 {
		t.Errorf("Rank(tp 1, dp 1) = %d, want 11", got)
	}
	if got, want := g.Coord(10), (GridCoord{DP: 1}); got != want {
		t.Errorf("Coord(10) = %+v, want %+v", got, want)
	}
}

func TestRankGeneratorErrors(t *testing.T) {
	cases := []struct {
		name               string
		tp, ep, dp, pp, cp int
		order              string
		offset             int
		want               []string
	}{
		{"ep and cp", 1, 2, 1, 1, 2, DefaultOrder, 0, []string{"ep = 2 and cp = 2 are both > 1"}},
		{"missing cp", 2, 1, 2, 1, 2, "tp-dp-pp", 0, []string{`the size of cp is 2, but the order "tp-dp-pp" does not name cp`}},
		{"missing two", 2, 1, 2, 3, 1, "tp", 0, []string{"the size of pp is 3", "the size of dp is 2"}},
		{"zero size", 0, 1, 1, 1, 1, DefaultOrder, 0, []string{"the size of tp is 0"}},
		{"offset", 1, 1, 1, 1, 1, DefaultOrder, -1, []string{"rank offset -1 is negative"}},
		{"unknown", 1, 1, 1, 1, 1, "tp-xp-dp", 0, []string{`unknown dimension "xp"`}},
		{"twice", 1, 1, 1, 1, 1, "tp-dp-tp", 0, []string{"names tp twice"}},
		{"empty name", 1, 1, 1, 1, 1, "tp--dp", 0, []string{"empty name"}},
	}
	for _, c := range cases {
		_, err := NewRankGenerator(c.tp, c.ep, c.dp, c.pp, c.cp, c.order, c.offset)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
}

func TestRankGeneratorPanics(t *testing.T) {
	g := mustGen(t, 2, 1, 2, 1, 1, DefaultOrder, 0)
	for name, f := range map[string]func(){
		"GetRanks unknown": func() { g.GetRanks("tp-xx") },
		"GetRanks twice":   func() { g.GetRanks("tp-tp") },
		"Rank range":       func() { g.Rank(GridCoord{TP: 2}) },
		"Coord range":      func() { g.Coord(4) },
		"Size unknown":     func() { g.Size("etp") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// permutations returns every ordering of xs.
func permutations(xs []string) [][]string {
	if len(xs) <= 1 {
		return [][]string{slices.Clone(xs)}
	}
	var out [][]string
	for i := range xs {
		rest := slices.Concat(xs[:i], xs[i+1:])
		for _, p := range permutations(rest) {
			out = append(out, append([]string{xs[i]}, p...))
		}
	}
	return out
}

// oracleGroups computes the groups of token without the mixed-radix formula: it walks
// every coordinate, computes its rank by Horner's rule in the order (last name
// outermost), buckets the ranks by their coordinates outside token, and sorts members
// and groups by rank (the reference's listing order, since strides are prefix products).
func oracleGroups(order []string, size map[string]int, token string) [][]int {
	in := map[string]bool{}
	for _, t := range strings.Split(token, "-") {
		in[t] = true
	}
	buckets := map[string][]int{}
	coord := make(map[string]int, len(order))
	var walk func(k int)
	walk = func(k int) {
		if k == len(order) {
			r := 0
			for i := len(order) - 1; i >= 0; i-- {
				r = r*size[order[i]] + coord[order[i]]
			}
			key := ""
			for _, d := range order {
				if !in[d] {
					key += fmt.Sprintf("%s%d.", d, coord[d])
				}
			}
			buckets[key] = append(buckets[key], r)
			return
		}
		for v := range size[order[k]] {
			coord[order[k]] = v
			walk(k + 1)
		}
	}
	walk(0)
	var groups [][]int
	for _, b := range buckets {
		sort.Ints(b)
		groups = append(groups, b)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i][0] < groups[j][0] })
	return groups
}

// Every token of every order agrees with the oracle, and Coord inverts Rank.
func TestRankGeneratorMatchesOracle(t *testing.T) {
	dims := []string{DimTP, DimCP, DimEP, DimDP, DimPP}
	shapes := []map[string]int{
		{DimTP: 2, DimCP: 3, DimEP: 1, DimDP: 2, DimPP: 2},
		{DimTP: 3, DimCP: 1, DimEP: 2, DimDP: 1, DimPP: 4},
		{DimTP: 1, DimCP: 2, DimEP: 1, DimDP: 5, DimPP: 1},
	}
	var tokens []string
	for mask := 1; mask < 1<<len(dims); mask++ {
		var ts []string
		for i, d := range dims {
			if mask&(1<<i) != 0 {
				ts = append(ts, d)
			}
		}
		tokens = append(tokens, strings.Join(ts, "-"))
	}
	for _, size := range shapes {
		for _, order := range permutations(dims) {
			o := strings.Join(order, "-")
			g := mustGen(t, size[DimTP], size[DimEP], size[DimDP], size[DimPP], size[DimCP], o, 0)
			for _, tok := range tokens {
				if got, want := g.GetRanks(tok), oracleGroups(order, size, tok); !reflect.DeepEqual(got, want) {
					t.Fatalf("order %s sizes %v token %s:\n got %v\nwant %v", o, size, tok, got, want)
				}
			}
			for r := range g.WorldSize() {
				if back := g.Rank(g.Coord(r)); back != r {
					t.Fatalf("order %s sizes %v: Rank(Coord(%d)) = %d", o, size, r, back)
				}
			}
		}
	}
}

func TestHierarchicalGroupsDocstring(t *testing.T) {
	// create_hierarchical_groups' docstring: 16 ranks, sizes [2, 2, 4].
	lv, err := HierarchicalGroups(seq(0, 15), []int{2, 2, 4})
	if err != nil {
		t.Fatal(err)
	}
	want := [][][]int{
		{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}},
		{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}},
		{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}},
	}
	if !reflect.DeepEqual(lv, want) {
		t.Errorf("HierarchicalGroups(0..15, [2 2 4]):\n got %v\nwant %v", lv, want)
	}
	// The members are taken by position, not by value.
	lv, err = HierarchicalGroups([]int{1, 3, 5, 7}, []int{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][][]int{{{1, 3}, {5, 7}}, {{1, 5}, {3, 7}}}; !reflect.DeepEqual(lv, want) {
		t.Errorf("HierarchicalGroups([1 3 5 7], [2 2]) = %v, want %v", lv, want)
	}
	if _, err := HierarchicalGroups(seq(0, 5), []int{2, 2}); err == nil || !strings.Contains(err.Error(), "multiply to 2·2 = 4, but the group has 6 ranks") {
		t.Errorf("HierarchicalGroups(6 ranks, [2 2]) error = %v", err)
	}
}
