package pp

import (
	"context"
	"encoding/xml"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
)

// TestTimelineBubble: on a hand-made two-stage timeline whose ranks each
// compute 6 of the 8 time units, the measured bubble is 25% per rank.
func TestTimelineBubble(t *testing.T) {
	tl := &Timeline{PP: 2, VPP: 1, Microbatches: 3, PPRank: []int{0, 1}, Ranks: [][]Span{
		{{Kind: Forward, Start: 0, End: 1}, {Kind: Forward, Start: 1, End: 2}, {Kind: Comm, Start: 2, End: 3}, {Kind: Backward, Start: 4, End: 8}},
		{{Kind: Forward, Start: 1, End: 2}, {Kind: Backward, Start: 2, End: 7}},
	}}
	for r, b := range tl.Bubbles() {
		if math.Abs(b-0.25) > 1e-12 {
			t.Errorf("rank %d: bubble %g, want 0.25", r, b)
		}
	}
	if b := Bubble([]float64{0.3, 0.1, 0.2}); b != 0.1 {
		t.Errorf("Bubble of idle fractions 0.3, 0.1, 0.2 = %g, want the busiest rank's 0.1", b)
	}
	if b := MeanBubble([]float64{0.3, 0.1, 0.2}); math.Abs(b-0.2) > 1e-12 {
		t.Errorf("MeanBubble of 0.3, 0.1, 0.2 = %g, want 0.2", b)
	}
	if got := TheoreticalBubble(2, 1, 8); math.Abs(got-1.0/9) > 1e-12 {
		t.Errorf("theoretical bubble (P=2, M=8) = %g, want 1/9", got)
	}
	if got := TheoreticalBubble(4, 2, 8); math.Abs(got-3.0/19) > 1e-12 {
		t.Errorf("theoretical bubble (P=4, V=2, M=8) = %g, want 3/19", got)
	}
}

// TestGatherTimeline: every rank's recorded events reach world rank 0 in
// rank order, with their kinds, microbatches, chunks and each rank's
// pipeline rank; the other ranks get nil. The drawing has a row per rank.
func TestGatherTimeline(t *testing.T) {
	const world = 3
	got := make([]*Timeline, world)
	err := local.NewWorld(world, comm.Options{Timeout: 20 * time.Second}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		r := NewRecorder()
		t0 := r.t0
		for i := range g.Rank() + 1 { // rank k records k+1 actions
			a := Action{Kind: Forward, Microbatch: i, Chunk: g.Rank()}
			r.Record(Event{Action: a, Start: t0.Add(time.Duration(i) * time.Millisecond), End: t0.Add(time.Duration(i+1) * time.Millisecond)})
		}
		tl, err := GatherTimeline(ctx, g, world-1-g.Rank(), r, Timeline{PP: world, VPP: 1, Microbatches: 3})
		got[g.Rank()] = tl
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[1] != nil || got[2] != nil {
		t.Fatal("a timeline on a rank other than 0")
	}
	tl := got[0]
	if tl == nil || tl.PP != world || tl.Microbatches != 3 || len(tl.Ranks) != world {
		t.Fatalf("timeline %+v", tl)
	}
	for r, spans := range tl.Ranks {
		if tl.PPRank[r] != world-1-r || len(spans) != r+1 {
			t.Errorf("rank %d: pipeline rank %d and %d spans, want %d and %d", r, tl.PPRank[r], len(spans), world-1-r, r+1)
		}
		for i, s := range spans {
			if s.Kind != Forward || s.Microbatch != i || s.Chunk != r || s.End-s.Start != int64(time.Millisecond) || s.Start != int64(i)*int64(time.Millisecond) {
				t.Errorf("rank %d span %d: %+v", r, i, s)
			}
		}
	}
	var b strings.Builder
	if err := tl.SVG(&b); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Texts []string `xml:"text"`
	}
	if err := xml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatalf("not well-formed SVG: %v", err)
	}
	rows := 0
	for _, s := range doc.Texts {
		if strings.HasPrefix(s, "rank ") {
			rows++
		}
	}
	if rows != world {
		t.Errorf("%d rank rows, want %d", rows, world)
	}
}

// TestTimelineWeightGrads: a split backward's W counts as busy time and is
// drawn (and named in the legend) as weight gradients.
func TestTimelineWeightGrads(t *testing.T) {
	tl := &Timeline{PP: 2, VPP: 1, Microbatches: 1, PPRank: []int{0, 1}, Ranks: [][]Span{
		{{Kind: Forward, Start: 0, End: 1}, {Kind: Backward, Start: 2, End: 3}, {Kind: WeightGrad, Start: 3, End: 4}},
		{{Kind: Forward, Start: 1, End: 2}, {Kind: Backward, Start: 2, End: 3}},
	}}
	if b := tl.Bubbles(); math.Abs(b[0]-0.25) > 1e-12 || math.Abs(b[1]-0.5) > 1e-12 {
		t.Errorf("bubbles %v, want [0.25 0.5] (W busy)", b)
	}
	var sb strings.Builder
	if err := tl.SVG(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), ">weight gradients<") || !strings.Contains(sb.String(), "rgb(52,168,83)") {
		t.Errorf("no weight-gradient box or legend in the drawing:\n%s", sb.String())
	}
}
