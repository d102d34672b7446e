package pp

import (
	"context"
	"fmt"
	"html"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gotron/gotron/comm"
)

// Span is one executed schedule action of one rank, in nanoseconds since
// the rank's Recorder started.
type Span struct {
	Kind              Kind
	Microbatch, Chunk int
	Start, End        int64
}

// Timeline is the measured schedule of one iteration on every rank of a
// world: the pipeline's size, the model chunks per rank and the
// microbatches, and each global rank's spans and pipeline rank.
type Timeline struct {
	PP, VPP, Microbatches int
	Ranks                 [][]Span // by global rank
	PPRank                []int    // each global rank's pipeline rank
	// Simulated, when set, says the timeline is Simulate's with these
	// times (a unit a millisecond), not a measurement.
	Simulated *StageTimes
	// Title, when set, says the timeline is simulated and names what
	// (SimulateStages' callers: gotron plan's predicted iteration).
	Title string
}

// Recorder collects one rank's spans while a traced iteration runs: its
// Record is the schedule's Args.Trace.
type Recorder struct {
	t0    time.Time
	spans []Span
}

// NewRecorder returns a recorder whose spans count from now.
func NewRecorder() *Recorder { return &Recorder{t0: time.Now()} }

// Record adds the event's action as a span.
func (r *Recorder) Record(e Event) {
	r.spans = append(r.spans, Span{Kind: e.Action.Kind, Microbatch: e.Action.Microbatch, Chunk: e.Action.Chunk,
		Start: e.Start.Sub(r.t0).Nanoseconds(), End: e.End.Sub(r.t0).Nanoseconds()})
}

// GatherTimeline collects every rank's spans (r) on world rank 0 and
// returns the timeline there (nil elsewhere); shape gives its PP, VPP and
// Microbatches, ppRank this rank's pipeline rank. Every rank of world
// must call it.
func GatherTimeline(ctx context.Context, world comm.Group, ppRank int, r *Recorder, shape Timeline) (*Timeline, error) {
	w := world
	mine := []int64{int64(ppRank)}
	for _, s := range r.spans {
		mine = append(mine, int64(s.Kind), int64(s.Microbatch), int64(s.Chunk), s.Start, s.End)
	}
	counts := make([]int64, w.Size())
	if err := w.AllGather(ctx, comm.I64(counts), comm.I64([]int64{int64(len(mine))})); err != nil {
		return nil, fmt.Errorf("pp: gathering the timeline: %w", err)
	}
	n := make([]int, len(counts))
	total := 0
	for i, c := range counts {
		n[i] = int(c)
		total += n[i]
	}
	all := make([]int64, total)
	if err := w.AllGatherV(ctx, comm.I64(all), comm.I64(mine), n); err != nil {
		return nil, fmt.Errorf("pp: gathering the timeline: %w", err)
	}
	if w.Rank() != 0 {
		return nil, nil
	}
	tl := &Timeline{PP: shape.PP, VPP: shape.VPP, Microbatches: shape.Microbatches}
	off := 0
	for _, k := range n {
		rec := all[off : off+k]
		off += k
		tl.PPRank = append(tl.PPRank, int(rec[0]))
		var spans []Span
		for i := 1; i+5 <= len(rec); i += 5 {
			spans = append(spans, Span{Kind: Kind(rec[i]), Microbatch: int(rec[i+1]), Chunk: int(rec[i+2]), Start: rec[i+3], End: rec[i+4]})
		}
		tl.Ranks = append(tl.Ranks, spans)
	}
	return tl, nil
}

// bounds returns the first start and the last end over every rank.
func (tl *Timeline) bounds() (int64, int64) {
	var lo, hi int64 = 1 << 62, 0
	for _, spans := range tl.Ranks {
		for _, s := range spans {
			lo, hi = min(lo, s.Start), max(hi, s.End)
		}
	}
	if lo > hi {
		lo = hi
	}
	return lo, hi
}

// Bubbles returns each rank's idle fraction: the part of the iteration's
// span (first action of any rank to last action of any rank) in which the
// rank ran no forward, backward or weight-gradient step.
func (tl *Timeline) Bubbles() []float64 {
	lo, hi := tl.bounds()
	out := make([]float64, len(tl.Ranks))
	for r, spans := range tl.Ranks {
		var busy int64
		for _, s := range spans {
			if s.Kind.computes() {
				busy += s.End - s.Start
			}
		}
		if hi > lo {
			out[r] = 1 - float64(busy)/float64(hi-lo)
		}
	}
	return out
}

// TheoreticalBubble is the pipeline bubble fraction of a schedule with
// equal forward and backward times per stage: (P−1)/(V·M+P−1)
// (Narayanan et al. 2021, arXiv 2104.04473 §2.2; V = 1 for 1F1B).
func TheoreticalBubble(p, v, m int) float64 {
	return float64(p-1) / float64(v*m+p-1)
}

// MeanBubble is the mean of the ranks' idle fractions: the pipeline
// bubble plus the load imbalance between stages.
func MeanBubble(b []float64) float64 {
	var s float64
	for _, x := range b {
		s += x
	}
	return s / float64(max(len(b), 1))
}

// Bubble is the measured pipeline bubble: the idle fraction of the busiest
// rank, the one on the critical path. With balanced stages every rank idles
// (P−1)/(V·M+P−1) of the iteration; with unbalanced ones the lighter
// stages idle more, and that extra (MeanBubble − Bubble, roughly) is load
// imbalance, not the schedule's fill and drain.
func Bubble(b []float64) float64 {
	if len(b) == 0 {
		return 0
	}
	return slices.Min(b)
}

// WriteSVG draws the timeline into the file path: one row per rank, forward steps in blue,
// backward steps in orange (darker for later model chunks), labelled with
// their microbatch, P2P exchanges and waits in grey, idle time blank; the
// title gives the measured and theoretical bubble.
func (tl *Timeline) WriteSVG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tl.SVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SVG writes the drawing WriteSVG makes to w.
func (tl *Timeline) SVG(w io.Writer) error {
	const width, left, rowH, top = 1200.0, 200.0, 34.0, 60.0
	lo, hi := tl.bounds()
	span := float64(max(hi-lo, 1))
	x := func(t int64) float64 { return left + (width-left-20)*float64(t-lo)/span }
	bub := tl.Bubbles()
	height := top + rowH*float64(len(tl.Ranks)) + 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title, sub := tl.headings(span, bub)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="40">%s</text>`+"\n", html.EscapeString(sub))
	for r, spans := range tl.Ranks {
		y := top + rowH*float64(r)
		fmt.Fprintf(&b, `<text x="10" y="%.0f">rank %d (pp %d): idle %.1f%%</text>`+"\n", y+rowH/2+4, r, tl.PPRank[r], 100*bub[r])
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#ccc"/>`+"\n", left, y+2, width-left-20, rowH-4)
		for _, s := range spans {
			x0, x1 := x(s.Start), x(s.End)
			fill, label := "", ""
			switch s.Kind {
			case Forward:
				fill, label = shade([3]int{66, 133, 244}, s.Chunk, tl.VPP), fmt.Sprint(s.Microbatch)
			case Backward:
				fill, label = shade([3]int{244, 160, 0}, s.Chunk, tl.VPP), fmt.Sprint(s.Microbatch)
			case WeightGrad:
				fill, label = shade([3]int{52, 168, 83}, s.Chunk, tl.VPP), fmt.Sprint(s.Microbatch)
			case EmbeddingWgrad:
				fill, label = embFill, "emb"
			case Comm, Wait:
				fill = "#bbbbbb"
			default:
				continue
			}
			hgt, yy := rowH-8, y+4
			if s.Kind == Comm || s.Kind == Wait {
				hgt, yy = (rowH-8)/3, y+rowH-4-(rowH-8)/3
			}
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`+"\n", x0, yy, max(x1-x0, 0.5), hgt, fill)
			if label != "" && x1-x0 > 12 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="white">%s</text>`+"\n", (x0+x1)/2, y+rowH/2+4, label)
			}
		}
	}
	ly := top + rowH*float64(len(tl.Ranks)) + 25
	legend := []struct{ fill, text string }{
		{shade([3]int{66, 133, 244}, 0, 1), "forward (number: microbatch; darker: later model chunk)"},
		{shade([3]int{244, 160, 0}, 0, 1), "backward"},
		{"#bbbbbb", "send/receive and waits"},
	}
	if tl.has(WeightGrad) {
		legend[1].text = "backward: input gradient"
		legend = append(legend, struct{ fill, text string }{shade([3]int{52, 168, 83}, 0, 1), "weight gradients"})
	}
	if tl.has(EmbeddingWgrad) {
		legend = append(legend, struct{ fill, text string }{embFill, "deferred output-layer weight gradients"})
	}
	step := 380.0
	if len(legend) > 3 {
		step = 295
	}
	for i, l := range legend {
		lx := 10 + step*float64(i)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="14" height="14" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", lx, ly, l.fill, lx+20, ly+11, html.EscapeString(l.text))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// headings are the drawing's title and the line under it: what was
// measured, or what was simulated.
func (tl *Timeline) headings(span float64, bub []float64) (string, string) {
	shape := fmt.Sprintf("PP %d, %d model chunk(s) per rank, %d microbatches", tl.PP, tl.VPP, tl.Microbatches)
	theory := fmt.Sprintf("theoretical (P−1)/(V·M+P−1) = %.1f%%", 100*TheoreticalBubble(tl.PP, tl.VPP, tl.Microbatches))
	if t := tl.Simulated; t != nil {
		return fmt.Sprintf("pipeline schedule, simulated: %s, F %g, B %g, W %g, message %g: %g time units", shape, t.F, t.B, t.W, t.Comm, span/1e6),
			fmt.Sprintf("the busiest rank idle %.1f%% of the iteration, 1F1B's %s; mean idle time of the ranks %.1f%%", 100*Bubble(bub), theory, 100*MeanBubble(bub))
	}
	if tl.Title != "" {
		return fmt.Sprintf("%s: %s, %.1f ms", tl.Title, shape, span/1e6),
			fmt.Sprintf("the busiest rank idle %.1f%% of the iteration, 1F1B's %s; mean idle time of the ranks %.1f%%", 100*Bubble(bub), theory, 100*MeanBubble(bub))
	}
	return fmt.Sprintf("pipeline schedule, one iteration: %s, %.1f ms", shape, span/1e6),
		fmt.Sprintf("measured bubble %.1f%% (the busiest rank's idle time), %s; mean idle time of the ranks %.1f%% (the rest is load imbalance between stages)", 100*Bubble(bub), theory, 100*MeanBubble(bub))
}

// embFill is the colour of the deferred output-layer weight gradients.
const embFill = "#0b7a75"

// has reports whether a rank ran an action of kind k.
func (tl *Timeline) has(k Kind) bool {
	for _, spans := range tl.Ranks {
		for _, sp := range spans {
			if sp.Kind == k {
				return true
			}
		}
	}
	return false
}

// shade darkens base for chunk c of v chunks.
func shade(base [3]int, c, v int) string {
	f := 1 - 0.45*float64(c)/float64(max(v, 1))
	return fmt.Sprintf("rgb(%d,%d,%d)", int(float64(base[0])*f), int(float64(base[1])*f), int(float64(base[2])*f))
}
