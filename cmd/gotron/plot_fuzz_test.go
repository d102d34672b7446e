package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// FuzzReadExpertLoad reads fuzzed bytes as a --log-json log (the seed
// corpus under testdata/fuzz/FuzzReadExpertLoad holds a whole log, a dense
// one, a cut-off line, a layer without tokens, two models mixed, a null
// "moe" and counts near the int64 limit). Reading must not panic; an error
// must be one line naming the file. A log that reads must hold at least
// one record, each with the same layers and experts, whose shares are in
// [0, 1] and add up to 1 (or are all NaN without tokens), and its summary
// and picture must be drawn, the picture well-formed SVG.
func FuzzReadExpertLoad(f *testing.F) {
	f.Add([]byte(`{"iteration":1,"moe":{"layers":[0],"tokens_per_expert":[[3,1]]}}`))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"iteration":1,"moe":{"layers":[0],"tokens_per_expert":[[1,2]]}}` + "\n" + `{"iteration":0}`))
	f.Fuzz(func(t *testing.T, log []byte) {
		l, err := readExpertLoad(bytes.NewReader(log), "f.jsonl")
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "f.jsonl") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("the error is not one line naming the file: %q", msg)
			}
			return
		}
		if len(l.tokens) == 0 || len(l.tokens) != len(l.iterations) || len(l.layers) == 0 || l.experts == 0 {
			t.Fatalf("read %d records of %d iterations, layers %v, %d experts", len(l.tokens), len(l.iterations), l.layers, l.experts)
		}
		for r, rec := range l.tokens {
			if len(rec) != len(l.layers) {
				t.Fatalf("record %d has %d layers, want %d", r, len(rec), len(l.layers))
			}
			for i, row := range rec {
				if len(row) != l.experts {
					t.Fatalf("record %d, layer %d: %d experts, want %d", r, i, len(row), l.experts)
				}
			}
		}
		for i := range l.layers {
			s := l.shares(i, 0, len(l.tokens))
			var sum float64
			for _, x := range s {
				if !math.IsNaN(x) && (x < 0 || x > 1) {
					t.Fatalf("layer %d: share %g", i, x)
				}
				sum += x
			}
			if !math.IsNaN(sum) && math.Abs(sum-1) > 1e-9 {
				t.Fatalf("layer %d: shares %v add up to %g", i, s, sum)
			}
		}
		_ = l.summary()
		var svg bytes.Buffer
		if err := l.svg(&svg, "f.jsonl"); err != nil {
			t.Fatal(err)
		}
		parseSVG(t, svg.Bytes())
	})
}
