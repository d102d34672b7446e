package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gotron/gotron/internal/golden"
)

// svgDoc is what the tests read of an SVG picture.
type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	Texts   []string `xml:"text"`
	Rects   []struct {
		Fill string `xml:"fill,attr"`
	} `xml:"rect"`
}

func parseSVG(t testing.TB, b []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not well-formed SVG: %v", err)
	}
	return doc
}

// TestPlotExpertLoadGolden draws testdata/expert_load.jsonl (two MoE
// layers, 1 and 3, of 4 experts over 5 iterations, with a blank and a
// validation line): the SVG is the recorded one (re-record with go test
// -update), and the summary gives each layer's most and least loaded
// expert over the run, computed by hand: layer 1's experts got 120, 80,
// 80 and 40 of 320 tokens, layer 3's 120, 120, 40 and 40 (a tie goes to
// the lower index).
func TestPlotExpertLoadGolden(t *testing.T) {
	out := filepath.Join(t.TempDir(), "load.svg")
	got, err := run(t, "plot", "expert-load", "--log-json", "testdata/expert_load.jsonl", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	want := "expert load over 5 record(s), iterations 1–5; shares of each layer's routed tokens over the run (balanced 1/4 = 25.0%): " +
		"layer 1 most expert 0 37.5%, least expert 3 12.5%; layer 3 most expert 0 37.5%, least expert 2 12.5%; written to " + out + "\n"
	if got != want {
		t.Errorf("summary\n%q, want\n%q", got, want)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b)
	var panels []string
	for _, s := range doc.Texts {
		if strings.HasPrefix(s, "layer ") {
			panels = append(panels, s)
		}
	}
	if len(panels) != 2 || !strings.HasPrefix(panels[0], "layer 1 — over the run: most loaded expert 0 (37.5%), least loaded expert 3 (12.5%)") {
		t.Errorf("panel titles %q, want layers 1 and 3 with their extremes", panels)
	}
	// Layer 3's expert 0 has the run's largest share, 40 of 64 tokens in
	// iteration 1: the scale's top, the darkest red. Layer 1's expert 3
	// got no tokens in iteration 5: the darkest blue.
	fills := map[string]bool{}
	for _, r := range doc.Rects {
		fills[r.Fill] = true
	}
	for _, c := range []string{mix(loadHigh, loadHigh, 0), mix(loadLow, loadLow, 0), mix(loadMid, loadMid, 0)} {
		if !fills[c] {
			t.Errorf("no cell coloured %s", c)
		}
	}
	if !strings.Contains(string(b), ">62.5%</text>") {
		t.Error("the colour scale does not end at the largest share, 62.5%")
	}
	golden.Check(t, filepath.Join("testdata", "expert_load.svg"), b)
}

// TestPlotExpertLoadColumns: a run longer than maxColumns iterations is
// drawn in maxColumns columns of consecutive iterations whose tokens are
// added; an expert that gets every token of a column makes it one box per
// row.
func TestPlotExpertLoadColumns(t *testing.T) {
	var log bytes.Buffer
	for it := 1; it <= 450; it++ {
		tokens := [][]int64{{int64(it), 10}}
		b, _ := json.Marshal(map[string]any{"iteration": it, "moe": map[string]any{"layers": []int{0}, "tokens_per_expert": tokens}})
		log.Write(append(b, '\n'))
	}
	l, err := readExpertLoad(&log, "long.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var svg strings.Builder
	if err := l.svg(&svg, "long.jsonl"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "one column per 2 or 3 consecutive iterations (their tokens added)") {
		t.Errorf("450 iterations in 200 columns are not described as 2 or 3 per column:\n%.600s", svg.String())
	}
	// The first column adds iterations 1 and 2: expert 0 has 3 of 23
	// tokens.
	s := l.shares(0, 0, 2)
	if want := 3.0 / 23; s[0] != want {
		t.Errorf("share of expert 0 in iterations 1–2: %g, want %g", s[0], want)
	}
	doc := parseSVG(t, []byte(svg.String()))
	cells := 0
	for _, r := range doc.Rects {
		if strings.HasPrefix(r.Fill, "rgb(") {
			cells++
		}
	}
	if cells > 2*maxColumns {
		t.Errorf("%d cells for 2 experts, want at most %d columns each", cells, maxColumns)
	}
}

// TestPlotExpertLoadErrors: a corrupt line is an error naming the file and
// the line; a log without MoE records, or none at all, is refused with
// the fix.
func TestPlotExpertLoadErrors(t *testing.T) {
	rec := func(it int, layers string, tokens string) string {
		return fmt.Sprintf(`{"iteration":%d,"loss":4,"moe":{"layers":%s,"tokens_per_expert":%s}}`, it, layers, tokens)
	}
	good := rec(1, "[0,2]", "[[1,2],[3,4]]")
	for _, c := range []struct {
		name, log string
		want      []string
	}{
		{"not JSON", good + "\nhello\n", []string{"f.jsonl:2:", "not a JSON object"}},
		{"cut-off line", good + "\n" + good[:40] + "\n", []string{"f.jsonl:2:", "cut-off last line"}},
		{"fractional tokens", "\n" + rec(1, "[0]", "[[1.5,2]]"), []string{"f.jsonl:2:", "not a record of gotron train --log-json"}},
		{"rows for layers", rec(1, "[0,2]", "[[1,2]]"), []string{"f.jsonl:1:", "1 rows of tokens_per_expert for 2 layers"}},
		{"ragged experts", rec(1, "[0,2]", "[[1,2],[3]]"), []string{"f.jsonl:1:", "2 experts in layer 0 and 1 in layer 2"}},
		{"negative tokens", rec(1, "[0]", "[[1,-2]]"), []string{"f.jsonl:1:", "-2 tokens for expert 1 of layer 0"}},
		{"unordered layers", rec(1, "[2,0]", "[[1],[2]]"), []string{"f.jsonl:1:", "not increasing"}},
		{"no experts", rec(1, "[0]", "[[]]"), []string{"f.jsonl:1:", "no experts"}},
		{"no iteration", `{"moe":{"layers":[0],"tokens_per_expert":[[1]]}}`, []string{"f.jsonl:1:", "without an iteration"}},
		{"losses for layers", `{"iteration":1,"moe":{"layers":[0],"z_loss":[1,2],"tokens_per_expert":[[1]]}}`, []string{"f.jsonl:1:", "2 values of z_loss for 1 layers"}},
		{"other model", good + "\n" + rec(2, "[0,2]", "[[1,2,3],[3,4,5]]"), []string{"f.jsonl:2:", "line 1 has layers [0 2] of 2 experts", "different models"}},
		{"dense", `{"iteration":1,"loss":4}` + "\n" + `{"iteration":1,"valid_loss":4}`, []string{"f.jsonl holds 1 iteration record(s) and none with MoE metrics", "--num-experts"}},
		{"empty", "\n", []string{"f.jsonl holds no records", "--num-experts"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readExpertLoad(strings.NewReader(c.log), "f.jsonl")
			if err == nil {
				t.Fatal("read, want an error")
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") {
				t.Errorf("the error is not one line: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
}

// TestPlotExpertLoadRefusesDenseLog: gotron plot expert-load on a dense
// model's log exits with status 1 and one line naming the file and the
// fix, writing no picture.
func TestPlotExpertLoadRefusesDenseLog(t *testing.T) {
	dir := t.TempDir()
	log, out := filepath.Join(dir, "dense.jsonl"), filepath.Join(dir, "load.svg")
	if err := os.WriteFile(log, []byte(`{"iteration":1,"loss":4.5,"lr":0.001}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runMain(t, "plot", "expert-load", "--log-json", log, "--out", out)
	want := "gotron: " + log + " holds 1 iteration record(s) and none with MoE metrics (\"moe\"): plot the --log-json log of a MoE model's run (gotron train --num-experts N ... --log-json FILE)\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("status %d, stdout %q, stderr\n%q; want 1, nothing and\n%q", code, stdout, stderr, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a picture was written")
	}
	if _, err := run(t, "plot", "expert-load"); err == nil || !strings.HasPrefix(err.Error(), "--log-json: ") {
		t.Errorf("without --log-json: %v, want an error naming --log-json", err)
	}
}

// TestPlotExpertLoadFromTraining trains a small MoE model (4 experts in
// layers 0 and 2 of 4) for 3 iterations with --log-json and draws its
// expert load: three columns per layer, and a summary naming both layers.
func TestPlotExpertLoadFromTraining(t *testing.T) {
	dir := t.TempDir()
	log, out := filepath.Join(dir, "log.jsonl"), filepath.Join(dir, "load.svg")
	if _, err := run(t, "train", "--mock-data", "--vocab-size", "64", "--num-layers", "4", "--hidden-size", "32",
		"--num-attention-heads", "4", "--seq-length", "16", "--micro-batch-size", "2", "--global-batch-size", "4",
		"--train-iters", "3", "--eval-iters", "0", "--num-experts", "4", "--moe-layer-freq", "2",
		"--moe-aux-loss-coeff", "1e-2", "--disable-bias-linear", "--log-json", log); err != nil {
		t.Fatal(err)
	}
	got, err := run(t, "plot", "expert-load", "--log-json", log, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^expert load over 3 record\(s\), iterations 1–3; .*: layer 0 most expert \d \d+\.\d%, least expert \d \d+\.\d%; layer 2 most .*; written to `).MatchString(got) {
		t.Errorf("summary %q", got)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b)
	experts := 0
	for _, s := range doc.Texts {
		if strings.HasPrefix(s, "expert ") && !strings.HasPrefix(s, "expert load") {
			experts++
		}
	}
	if experts != 8 {
		t.Errorf("%d expert rows labelled, want 4 in each of 2 layers", experts)
	}
}
