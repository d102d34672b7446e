package pp

import (
	"strings"
	"testing"
)

func TestFormatJSONShape(t *testing.T) {
	ss := mustBuildAll(t, Config{PP: 2, Microbatches: 4})
	j, err := FormatJSON(ss)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"pp":2,"vpp":1,"microbatches":4,"group_size":2,"ranks":[` +
		`{"rank":0,"warmup":1,"remaining":3,"order":[1,1,-1,1,-1,1,-1,-1]},` +
		`{"rank":1,"warmup":0,"remaining":4,"order":[1,-1,1,-1,1,-1,1,-1]}]}`
	if string(j) != want {
		t.Errorf("got\n%s\nwant\n%s", j, want)
	}
	// Forward-only orders hold forwards only.
	ss = mustBuildAll(t, Config{PP: 2, Microbatches: 2, ForwardOnly: true})
	j, _ = FormatJSON(ss)
	if !strings.Contains(string(j), `"order":[1,1]`) {
		t.Errorf("forward only: %s", j)
	}
}

func TestFormatGrid(t *testing.T) {
	g := FormatGrid(mustBuildAll(t, Config{PP: 2, VPP: 2, Microbatches: 4, OverlapP2PComm: true}))
	lines := strings.Split(strings.TrimSpace(g), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want header, 2 ranks, legend:\n%s", len(lines), g)
	}
	for _, want := range []string{"forward_backward_pipelining_with_interleaving: pp 2, vpp 2, 4 microbatches, group size 2",
		"rank 0 (W 4, R 4) | nosync F0.0", "{sp0.1 rn1.1}", "w:rn0.1", "B3.0"} {
		if !strings.Contains(g, want) {
			t.Errorf("grid lacks %q:\n%s", want, g)
		}
	}
	// Columns line up: every rank's row starts its actions at one offset.
	i0, i1 := strings.Index(lines[1], "|"), strings.Index(lines[2], "|")
	if i0 != i1 {
		t.Errorf("rows not aligned:\n%s", g)
	}
	g = FormatGrid(mustBuildAll(t, Config{PP: 2, Microbatches: 2}))
	if !strings.Contains(g, "F0 ") || strings.Contains(g, "F0.0") {
		t.Errorf("one chunk shows microbatches only:\n%s", g)
	}
}
