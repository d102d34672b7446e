package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// expandedString runs the two substitutions of the layout grammar and
// returns the result before the characters are checked.
func expandedString(t *testing.T, src string) string {
	t.Helper()
	var in []sym
	for i, r := range []rune(src) {
		if r != ',' {
			in = append(in, sym{r, i})
		}
	}
	in, err := expandGroups(src, in)
	if err == nil {
		in, err = expandChars(src, in)
	}
	if err != nil {
		t.Fatalf("expand %q: %v", src, err)
	}
	var b strings.Builder
	for _, c := range in {
		b.WriteRune(c.r)
	}
	return b.String()
}

// TestLayoutExpansion checks the two non-recursive left-to-right passes
// against the results of the reference's re.sub calls (computed with
// Python's re on these strings), including the docstring's examples and the
// corner cases where the passes do not nest.
func TestLayoutExpansion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"xy(ab|cd|ef)*2,pq", "xyab|cd|efab|cd|efpq"},
		{"(ab)*3", "ababab"},
		{"ab,(cd|)*2", "abcd|cd|"},
		{"(|ab)*2,cd", "|ab|abcd"},
		{"((t)*2)*3", "(t(t)))"},
		{"t*2*3", "tt*3"},
		{"t**2", "t**"},
		{"(t*2|)*3", "tt|tt|tt|"},
		{"|*3", "|||"},
		{"t*0", ""},
		{"(t)*0", ""},
		{"t*007", "ttttttt"},
		{"()*3", "()))"},
		{"(t|)*2)*3", "t|t|)))"},
		{"((t|)*2", "(t|(t|"},
		{"(t*)*2", "t*t*"},
		{"(|tt)*2,tL", "|tt|tttL"},
		{"E|t*3|(t|)*5mL", "E|ttt|t|t|t|t|t|mL"},
		{"t*", "t*"},
		{"t)*2", "t))"},
		{"*3", "*3"},
		{"E*1t*2L*1", "EttL"},
		{"(t|t)*2*2", "t|tt|tt"},
		{"t\n*2", "t\n*2"},
		{"(E)*1(t)*2|L", "Ett|L"},
		{"Et*3|(tt|)*29,m|L", "Ettt|" + strings.Repeat("tt|", 29) + "m|L"},
	} {
		if got := expandedString(t, tc.in); got != tc.want {
			t.Errorf("expand %q = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func mustParse(t *testing.T, s string, pp int) *PipelineLayout {
	t.Helper()
	l, err := ParsePipelineLayout(s, pp)
	if err != nil {
		t.Fatalf("ParsePipelineLayout(%q, %d): %v", s, pp, err)
	}
	return l
}

// layoutGrid returns the layout's stages as grid[p][v] strings.
func layoutGrid(l *PipelineLayout) [][]string {
	g := make([][]string, l.PP())
	for p := range g {
		for v := 0; v < l.VPP(); v++ {
			g[p] = append(g[p], stagesString([][]LayerType{l.Stage(p, v)}))
		}
	}
	return g
}

func decoderOffsets(l *PipelineLayout, p int) []int {
	var out []int
	for v := 0; v < l.VPP(); v++ {
		out = append(out, l.LayerOffset(LayerDecoder, v, p))
	}
	return out
}

// TestLayoutDeepSeek is the worked example of docs/SEMANTICS.md § Pipeline
// layout strings and the reference's documentation: 61 decoder layers and one
// MTP layer on PP 16, VPP 2.
func TestLayoutDeepSeek(t *testing.T) {
	l := mustParse(t, "Et*3|(tt|)*29,m|L", 16)
	if l.NumStages() != 32 || l.VPP() != 2 || l.PP() != 16 {
		t.Fatalf("stages %d, pp %d, vpp %d; want 32, 16, 2", l.NumStages(), l.PP(), l.VPP())
	}
	if want := "Ettt|" + strings.Repeat("tt|", 29) + "m|L"; l.String() != want {
		t.Errorf("String() = %q, want %q", l.String(), want)
	}
	if l.Count(LayerDecoder) != 61 || l.Count(LayerMTP) != 1 {
		t.Errorf("%d decoders, %d mtp", l.Count(LayerDecoder), l.Count(LayerMTP))
	}
	if err := l.Validate(61, 1); err != nil {
		t.Fatal(err)
	}
	if !l.MTPStandalone() {
		t.Error("MTPStandalone = false: the mtp is on pp 14, not the last rank")
	}
	g := layoutGrid(l)
	want := map[int][]string{0: {"Ettt", "tt"}, 14: {"tt", "m"}, 15: {"tt", "L"}}
	wantOff := map[int][]int{0: {0, 33}, 14: {29, 61}, 15: {31, 61}}
	for k := 1; k <= 13; k++ {
		want[k] = []string{"tt", "tt"}
		wantOff[k] = []int{1 + 2*k, 33 + 2*k}
	}
	for p := 0; p < 16; p++ {
		if strings.Join(g[p], "|") != strings.Join(want[p], "|") {
			t.Errorf("pp %d holds %q, want %q", p, g[p], want[p])
		}
		if got := decoderOffsets(l, p); !slices.Equal(got, wantOff[p]) {
			t.Errorf("pp %d decoder offsets %v, want %v", p, got, wantOff[p])
		}
	}
	if n := l.NumLayersToBuild(LayerDecoder, 0, 0); n != 3 {
		t.Errorf("pp 0 vp 0 builds %d decoders, want 3", n)
	}
	if n, o := l.NumLayersToBuild(LayerMTP, 1, 14), l.LayerOffset(LayerMTP, 1, 14); n != 1 || o != 0 {
		t.Errorf("pp 14 vp 1: %d mtp at offset %d, want 1 at 0", n, o)
	}
}

// TestLayoutEmptyStage is "E||t|L" at PP 4 / VPP 1 and PP 2 / VPP 2.
func TestLayoutEmptyStage(t *testing.T) {
	l := mustParse(t, "E||t|L", 4)
	if l.VPP() != 1 {
		t.Fatalf("vpp %d, want 1", l.VPP())
	}
	if err := l.Validate(1, 0); err != nil {
		t.Fatal(err)
	}
	wantStage := []string{"E", "", "t", "L"}
	wantOff := []int{0, 0, 0, 1}
	for p := 0; p < 4; p++ {
		if g := layoutGrid(l)[p][0]; g != wantStage[p] {
			t.Errorf("pp %d holds %q, want %q", p, g, wantStage[p])
		}
		if o := l.LayerOffset(LayerDecoder, 0, p); o != wantOff[p] {
			t.Errorf("pp %d offset %d, want %d", p, o, wantOff[p])
		}
	}

	l = mustParse(t, "E||t|L", 2)
	if l.VPP() != 2 {
		t.Fatalf("vpp %d, want 2", l.VPP())
	}
	g := layoutGrid(l)
	if strings.Join(g[0], "|") != "E|t" || strings.Join(g[1], "|") != "|L" {
		t.Errorf("pp0 %q, pp1 %q; want [E t], [ L]", g[0], g[1])
	}
	if err := l.Validate(1, 0); err != nil {
		t.Fatal(err)
	}
	if l.MTPStandalone() {
		t.Error("MTPStandalone without mtp")
	}
}

// TestLayoutReferenceTests are the layouts of the reference's
// tests/unit_tests/pipeline_parallel/test_pipeline_layout.py: PP 4, VPP 2,
// 8 decoder layers, one MTP layer.
func TestLayoutReferenceTests(t *testing.T) {
	for _, tc := range []struct {
		layout     string
		grid       [4]string // pp rank: "vp0|vp1"
		standalone bool
	}{
		{"E|t*3|(t|)*5mL", [4]string{"E|t", "ttt|t", "t|t", "t|mL"}, false},
		{"E|t*3|(t|)*4tm|L", [4]string{"E|t", "ttt|t", "t|tm", "t|L"}, true},
		{"E|t*3|(t|)*3tt|m|L", [4]string{"E|t", "ttt|tt", "t|m", "t|L"}, true},
	} {
		l := mustParse(t, tc.layout, 4)
		if l.VPP() != 2 {
			t.Fatalf("%q: vpp %d", tc.layout, l.VPP())
		}
		if err := l.Validate(8, 1); err != nil {
			t.Fatalf("%q: %v", tc.layout, err)
		}
		for p, g := range layoutGrid(l) {
			if strings.Join(g, "|") != tc.grid[p] {
				t.Errorf("%q: pp %d holds %q, want %q", tc.layout, p, g, tc.grid[p])
			}
		}
		if l.MTPStandalone() != tc.standalone {
			t.Errorf("%q: MTPStandalone %v", tc.layout, !tc.standalone)
		}
		// The decoder offsets are cumulative in layer order.
		off := 0
		for v := 0; v < 2; v++ {
			for p := 0; p < 4; p++ {
				if o := l.LayerOffset(LayerDecoder, v, p); o != off {
					t.Errorf("%q: (pp %d, vp %d) offset %d, want %d", tc.layout, p, v, o, off)
				}
				off += l.NumLayersToBuild(LayerDecoder, v, p)
			}
		}
	}
}

// TestLayoutLeadingEmptyStage is "(|tt)*2,tL": stages [], [t t], [t t t L].
func TestLayoutLeadingEmptyStage(t *testing.T) {
	l := mustParse(t, "(|tt)*2,tL", 3)
	if got := l.String(); got != "|tt|tttL" {
		t.Errorf("String() = %q", got)
	}
	st := l.Stages()
	if len(st) != 3 || len(st[0]) != 0 || len(st[1]) != 2 || len(st[2]) != 4 || st[2][3] != LayerLoss {
		t.Errorf("stages %v", st)
	}
	// It has no embedding, so it is not a valid model layout.
	err := l.Validate(5, 0)
	if err == nil || !strings.Contains(err.Error(), "no embedding layer E") {
		t.Errorf("Validate: %v", err)
	}
	if l.Source() != "(|tt)*2,tL" {
		t.Errorf("Source() = %q", l.Source())
	}
}

func TestLayoutParseErrors(t *testing.T) {
	for _, tc := range []struct {
		layout string
		pp     int
		want   string // the whole first line of the error
		pos    int
	}{
		{"Et*3|tt|x|L", 1,
			`pipeline_model_parallel_layout "Et*3|tt|x|L": invalid layer character 'x' at position 9 (stage 2): use E (embedding), t (decoder), m (MTP), L (loss), | between stages`, 8},
		{"Et|t|tt|tt|tt|L", 4,
			`pipeline_model_parallel_layout "Et|t|tt|tt|tt|L": layout has 6 stages, not divisible by pipeline_model_parallel_size 4: use a multiple of 4 stages (4 or 8)`, -1},
		{"E|t|L", 4,
			`pipeline_model_parallel_layout "E|t|L": layout has 3 stages, not divisible by pipeline_model_parallel_size 4: use a multiple of 4 stages (4)`, -1},
		{"E(tt)|L", 1, "invalid layer character '(' at position 2 (stage 0): use E (embedding), t (decoder), m (MTP), L (loss), | between stages; a group is (…)*N with a count, and groups do not nest", 1},
		{"((t)*2)*3|L", 1, "invalid layer character '(' at position 2", 1}, // "(t(t)))": the body's '('

		{"Et**2|L", 1, "invalid layer character '*' at position 3 (stage 0)", 2},
		{"Et*|L", 1, "*N repeats the one character", 2},
		{"ET|L", 1, `did you mean 't'?`, 1},
		{"et|L", 1, `did you mean 'E'?`, 0},
		{"E t|L", 1, "spaces are not allowed", 1},
		{"E|(t|)*2x", 1, "invalid layer character 'x' at position 9 (stage 3)", 8},
		{"E3|L", 1, "a count must follow *", 1},
		{"Et*99999999999999999999|L", 1, "expands the layout beyond 65536 characters", 2},
		{"E(t|t)*40000|L", 1, "the repetition at position 7 expands", 6},
		{"E|L", 0, "pipeline_model_parallel_size is 0", -1},
	} {
		_, err := ParsePipelineLayout(tc.layout, tc.pp)
		var le *LayoutError
		if !errors.As(err, &le) {
			t.Errorf("%q pp %d: error %v, want a *LayoutError", tc.layout, tc.pp, err)
			continue
		}
		first := strings.SplitN(err.Error(), "\n", 2)[0]
		if !strings.Contains(first, tc.want) {
			t.Errorf("%q pp %d:\n got %s\nwant %s", tc.layout, tc.pp, first, tc.want)
		}
		if le.Pos != tc.pos {
			t.Errorf("%q: Pos %d, want %d", tc.layout, le.Pos, tc.pos)
		}
	}
}

// TestLayoutCaret checks the caret line under the offending character.
func TestLayoutCaret(t *testing.T) {
	_, err := ParsePipelineLayout("Et*3|tt|x|L", 1)
	want := `pipeline_model_parallel_layout "Et*3|tt|x|L": invalid layer character 'x' at position 9 (stage 2): use E (embedding), t (decoder), m (MTP), L (loss), | between stages` +
		"\n    Et*3|tt|x|L\n            ^"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

func TestLayoutValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		layout    string
		pp        int
		numLayers int
		mtp       int
		want      []string // one substring per expected error, in order
	}{
		{"Et*3|t*3|L", 3, 8, 0, []string{"layout has 6 decoder layers (t) but num_layers is 8: add 2 t or set --num-layers 6"}},
		{"Et*3|t*4|L", 3, 6, 0, []string{"layout has 7 decoder layers (t) but num_layers is 6: remove 1 t or set --num-layers 7"}},
		{"tE|tt|L", 3, 3, 0, []string{"the first layer must be the embedding E, but it is t at position 1 (stage 0): move E to the start of the first stage"}},
		{"Et|tt|Lt", 3, 4, 0, []string{"the last layer must be the loss L, but it is t at position 8 (stage 2)"}},
		{"t|tt|tL", 3, 4, 0, []string{"layout has no embedding layer E"}},
		{"Et|tt|t", 3, 4, 0, []string{"layout has no loss layer L"}},
		{"", 1, 1, 0, []string{"no embedding layer E", "no loss layer L", "layout has 0 decoder layers (t) but num_layers is 1"}},
		{"Et|Et|L", 3, 2, 0, []string{"the embedding E appears 2 times (positions 1, 4): it must appear exactly once"}},
		{"EtL|t|L", 3, 2, 0, []string{"the loss L appears 2 times (positions 3, 7)"}},
		{"Et|t|mL", 3, 2, 0, []string{"layout has 1 MTP layers (m) but mtp_num_layers is unset (0): remove the m or set --mtp-num-layers 1"}},
		{"Et|t|mL", 3, 2, 2, []string{"layout has 1 MTP layers (m) but mtp_num_layers is 2: write 2 m or set --mtp-num-layers 1",
			"stage 2 (pipeline rank 2) holds 1 of the mtp_num_layers = 2 MTP layers"}},
		{"Et|mt|L", 3, 2, 1, []string{"decoder layer t at position 5 (stage 1) comes after the first MTP layer m at position 4 (stage 1)"}},
		{"Et|m|t|L", 2, 2, 1, []string{"decoder layer t at position 6 (stage 2) comes after", "MTP layer m at position 4 is in stage 1, virtual stage 0 of pipeline rank 1: MTP layers must be in the last virtual stage (1) of a rank, stages 2…3"}},
		{"Em|t|t|L", 2, 2, 1, []string{"decoder layer t at position 4", "MTP layer m at position 2 is in stage 0, virtual stage 0 of pipeline rank 0"}},
		{"Et|t|m|mL", 2, 2, 2, []string{"stage 2 (pipeline rank 0) holds 1 of the mtp_num_layers = 2 MTP layers", "stage 3 (pipeline rank 1) holds 1"}},
		{"|EtL", 2, 1, 0, []string{"the embedding E is in stage 1, but it must be in the first stage (0: pipeline rank 0, virtual stage 0): remove the empty stages before it"}},
		{"Et|t|L|", 2, 2, 0, []string{"the loss L is in stage 2, but it must be in the last stage (3: pipeline rank 1, virtual stage 1): remove the empty stages after it"}},
	} {
		l := mustParse(t, tc.layout, tc.pp)
		err := l.Validate(tc.numLayers, tc.mtp)
		if err == nil {
			t.Errorf("%q: valid", tc.layout)
			continue
		}
		var got []string
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var le *LayoutError
			if !errors.As(e, &le) {
				t.Errorf("%q: %T is not a *LayoutError", tc.layout, e)
			}
			got = append(got, le.Error())
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: %d errors, want %d:\n%s", tc.layout, len(got), len(tc.want), strings.Join(got, "\n"))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%q error %d:\n got %s\nwant %s", tc.layout, i, got[i], w)
			}
		}
	}
}

func TestLayoutStagePanics(t *testing.T) {
	l := mustParse(t, "E|t|t|L", 2)
	defer func() {
		if recover() == nil {
			t.Error("Stage(2, 0) did not panic")
		}
	}()
	l.Stage(2, 0)
}

func TestLayerTypeNames(t *testing.T) {
	for _, tc := range []struct {
		t            LayerType
		letter, name string
	}{{LayerEmbedding, "E", "embedding"}, {LayerDecoder, "t", "decoder"}, {LayerMTP, "m", "mtp"}, {LayerLoss, "L", "loss"}} {
		if tc.t.Letter() != tc.letter || tc.t.String() != tc.name {
			t.Errorf("%q: %q %q", rune(tc.t), tc.t.Letter(), tc.t.String())
		}
	}
	if validLayerType('E'+0x100) || validLayerType('x') {
		t.Error("validLayerType accepts a non-letter")
	}
}
