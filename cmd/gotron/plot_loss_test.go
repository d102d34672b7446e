package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotLoss: two runs' logs give one picture with a line per run in
// each panel, the validation losses as dots, a skipped step breaking the
// gradient-norm line, and a summary line per run.
func TestPlotLoss(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "pp1.jsonl"), filepath.Join(dir, "pp2.jsonl")
	write := func(path string, skip int) {
		var s strings.Builder
		for it := 1; it <= 10; it++ {
			norm := fmt.Sprint(1.0 / float64(it))
			if it == skip {
				norm = "null"
			}
			fmt.Fprintf(&s, `{"iteration":%d,"loss":%g,"lr":%g,"grad_norm":%s,"tokens_per_s":1}`+"\n", it, 5-0.3*float64(it), 1e-3*float64(it), norm)
			if it%5 == 0 {
				fmt.Fprintf(&s, `{"iteration":%d,"valid_loss":%g}`+"\n", it, 4.5-0.3*float64(it))
			}
		}
		if err := os.WriteFile(path, []byte(s.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a, 0)
	write(b, 4)
	svg := filepath.Join(dir, "loss.svg")
	out, err := run(t, "plot", "loss", "--log-json", a, "--log-json", b, "--out", svg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "pp1.jsonl: 10 iterations (1 to 10), last training loss 2.0000, lowest validation loss 1.5000 at iteration 10") {
		t.Errorf("summary:\n%s", out)
	}
	pic, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(pic)
	// 3 panels × 2 runs, and one more for the broken gradient-norm line.
	if n := strings.Count(s, "<polyline"); n != 7 {
		t.Errorf("%d lines, want 7", n)
	}
	if n := strings.Count(s, "<circle"); n != 4 {
		t.Errorf("%d validation dots, want 4", n)
	}
	if !strings.HasSuffix(strings.TrimSpace(s), "</svg>") || !strings.Contains(s, "pp2.jsonl") {
		t.Error("not a whole picture naming both runs")
	}
}

// TestPlotLossRefuses: no log, a missing file, a log of no iterations and
// a line that is not a record are refused, each in one line naming the
// file.
func TestPlotLossRefuses(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, []byte(`{"iteration":3,"valid_loss":2}`+"\n"), 0o644)
	junk := filepath.Join(dir, "junk.jsonl")
	os.WriteFile(junk, []byte("{\"iteration\":1,\"loss\":2,\"lr\":1}\n{\"iter"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--log-json"},
		{[]string{"--log-json", filepath.Join(dir, "none.jsonl")}, "none.jsonl"},
		{[]string{"--log-json", empty}, "no training iterations"},
		{[]string{"--log-json", junk}, "junk.jsonl:2"},
	} {
		_, err := run(t, append([]string{"plot", "loss", "--out", filepath.Join(dir, "x.svg")}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.args, err, c.want)
		}
	}
}

// FuzzReadLossLog reads fuzzed bytes as a --log-json log and draws what
// reads: no panic, no endless loop, an error in one line naming the file.
func FuzzReadLossLog(f *testing.F) {
	f.Add([]byte(`{"iteration":1,"loss":3,"lr":0.001,"grad_norm":1}` + "\n" + `{"iteration":1,"valid_loss":2.5}`))
	f.Add([]byte(`{"iteration":1,"loss":1e308,"lr":-1e308,"grad_norm":null}`))
	f.Add([]byte(`{"iteration":1,"loss":1,"lr":1,"grad_norm":5e-324}` + "\n" + `{"iteration":2,"loss":1,"lr":1,"grad_norm":0}`))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, log []byte) {
		r, err := readLossLog(bytes.NewReader(log), "f.jsonl")
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "f.jsonl") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("the error is not one line naming the file: %q", msg)
			}
			return
		}
		var b bytes.Buffer
		if err := lossSVG(&b, []*lossRun{r}); err != nil || !bytes.HasSuffix(b.Bytes(), []byte("</svg>\n")) {
			t.Fatalf("drawing: %v", err)
		}
	})
}
