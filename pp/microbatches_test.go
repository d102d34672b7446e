package pp

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestGetPPRankMicrobatches(t *testing.T) {
	for _, c := range []struct {
		m, v, g, p, r int
		inter, fo     bool
		total, w, rem int
		all           bool
	}{
		{m: 8, v: 1, g: 4, p: 4, r: 0, total: 8, w: 3, rem: 5},
		{m: 8, v: 1, g: 4, p: 4, r: 3, total: 8, w: 0, rem: 8},
		{m: 2, v: 1, g: 4, p: 4, r: 0, total: 2, w: 2, rem: 0, all: true},
		// W = 2·(P−r−1) + (V−1)·G.
		{m: 8, v: 2, g: 4, p: 4, r: 0, inter: true, total: 16, w: 10, rem: 6},
		{m: 8, v: 2, g: 4, p: 4, r: 3, inter: true, total: 16, w: 4, rem: 12},
		{m: 5, v: 2, g: 3, p: 2, r: 0, inter: true, total: 10, w: 5, rem: 5},
		{m: 4, v: 2, g: 4, p: 4, r: 0, inter: true, total: 8, w: 8, rem: 0, all: true},
		{m: 8, v: 2, g: 4, p: 4, r: 1, inter: true, fo: true, total: 16, w: 16, rem: 0, all: true},
		{m: 3, v: 1, g: 1, p: 1, r: 0, total: 3, w: 0, rem: 3},
	} {
		total, w, rem, all := GetPPRankMicrobatches(c.m, c.v, c.g, c.p, c.r, c.inter, c.fo)
		if total != c.total || w != c.w || rem != c.rem || all != c.all {
			t.Errorf("%+v: got total %d warmup %d remaining %d all %v", c, total, w, rem, all)
		}
	}
}

// TestScheduleTableDocstring checks the reference's docstring example:
// PP2, M = 5, G = 3, C = 2, W = 5.
func TestScheduleTableDocstring(t *testing.T) {
	table := GetScheduleTable(5, 2, 3)
	var mbs, chunks []int
	for _, e := range table {
		mbs = append(mbs, e.Microbatch)
		chunks = append(chunks, e.Chunk)
	}
	if want := []int{0, 1, 2, 0, 1, 2, 3, 4, 3, 4}; !slices.Equal(mbs, want) {
		t.Errorf("microbatches %v, want %v", mbs, want)
	}
	if want := []int{0, 0, 0, 1, 1, 1, 0, 0, 1, 1}; !slices.Equal(chunks, want) {
		t.Errorf("chunks %v, want %v", chunks, want)
	}
	_, w, _, _ := GetPPRankMicrobatches(5, 2, 3, 2, 0, true, false)
	if w != 5 {
		t.Fatalf("warmup %d, want 5", w)
	}
	got := ConvertScheduleTableToOrder(w, 2, table)
	want := []int{1, 1, 1, 2, 2, 2, -2, 1, -2, 1, -2, 2, -1, 2, -1, -1, -2, -2, -1, -1}
	if !slices.Equal(got, want) {
		t.Errorf("order\n%v, want\n%v", got, want)
	}
	// The rank-0 schedule runs exactly that order.
	s, err := WithInterleaving(InterleavedConfig{PP: 2, Microbatches: 5, Chunks: 2, GroupSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Order, want) {
		t.Errorf("schedule order\n%v, want\n%v", s.Order, want)
	}
}

// TestOrderProperties is the reference's test_get_pipeline_parallel_order
// over its grid, for every rank: length 2·M·V, max V, running sum ≥ 0
// ending at 0, never a backward of a chunk before as many forwards.
func TestOrderProperties(t *testing.T) {
	for _, pg := range [][2]int{{1, 1}, {2, 2}, {2, 4}, {4, 4}, {4, 5}, {8, 9}, {8, 11}} {
		p, g := pg[0], pg[1]
		for _, m := range []int{8, 32} {
			for _, v := range []int{0, 2, 4, 8} {
				if p == 1 && v > 0 {
					continue
				}
				chunks := max(v, 1)
				for r := range p {
					_, w, _, _ := GetPPRankMicrobatches(m, chunks, g, p, r, v > 0, false)
					order := ConvertScheduleTableToOrder(w, chunks, GetScheduleTable(m, chunks, g))
					name := fmt.Sprintf("P%d G%d M%d V%d r%d", p, g, m, v, r)
					if len(order) != 2*m*chunks || slices.Max(order) != chunks {
						t.Fatalf("%s: length %d, max %d", name, len(order), slices.Max(order))
					}
					cnt := map[int]int{}
					sum := 0
					for _, o := range order {
						cnt[o]++
						if o < 0 && cnt[o] > cnt[-o] {
							t.Fatalf("%s: %v: backward %d before its forward", name, order, o)
						}
						sum += o
						if sum < 0 {
							t.Fatalf("%s: running sum < 0", name)
						}
					}
					if sum != 0 {
						t.Fatalf("%s: sum %d", name, sum)
					}
				}
			}
		}
	}
}

func TestValidateInterleaved(t *testing.T) {
	for _, c := range []struct {
		p, m, g int
		want    []string // substrings; none means valid
	}{
		{2, 4, 2, nil},
		{2, 5, 3, nil},
		{4, 8, 4, nil},
		{4, 12, 4, nil},
		{4, 12, 5, []string{"12 mod 5 = 2 microbatches", "stage 4 (valid for 12 microbatches on 4 stages: 4, 6, 7, 8, 12)", "or 10 or 14 microbatches"}},
		{4, 11, 4, []string{"11 mod 4 = 3 microbatches", "--microbatch-group-size-per-virtual-pipeline-stage 6", "6, 7, 11", "or 12 microbatches"}},
		{2, 7, 3, []string{"7 mod 3 = 1 microbatch", "pipeline_model_parallel_size = 2",
			"--microbatch-group-size-per-virtual-pipeline-stage 4", "4, 5, 7", "or 6 or 8 microbatches"}},
		{4, 9, 4, []string{"9 mod 4 = 1", "--microbatch-group-size-per-virtual-pipeline-stage 5", "or 8 microbatches"}},
		{4, 8, 2, []string{"[pipeline_model_parallel_size, num_microbatches] = [4, 8]",
			"--microbatch-group-size-per-virtual-pipeline-stage 4", "4, 8"}},
		{4, 8, 9, []string{"--microbatch-group-size-per-virtual-pipeline-stage 8", "or 9 microbatches"}},
		{4, 3, 4, []string{"num_microbatches = 3 < 4", "choose 4 or more microbatches"}},
		{4, 3, 2, []string{"choose 4 or more microbatches", "between 4 and it"}},
		{2, 4, 0, []string{"must be ≥ 1"}},
	} {
		err := ValidateInterleaved(c.p, c.m, c.g)
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("P%d M%d G%d: %v", c.p, c.m, c.g, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("P%d M%d G%d: no error", c.p, c.m, c.g)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("P%d M%d G%d: %q lacks %q", c.p, c.m, c.g, err, w)
			}
		}
		// Every proposed group size is valid.
		for _, g := range ValidGroupSizes(c.p, c.m) {
			if ValidateInterleaved(c.p, c.m, g) != nil {
				t.Errorf("P%d M%d: proposed G %d is refused", c.p, c.m, g)
			}
		}
	}
}
