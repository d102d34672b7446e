package train

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
	"github.com/gotron/gotron/pp"
)

// span is one executed schedule action of one rank, in nanoseconds since
// the rank's start of the profiled iteration.
type span struct {
	kind       pp.Kind
	mb, chunk  int
	start, end int64
}

// timeline is the measured schedule of one iteration on every rank.
type timeline struct {
	pp, vpp, m int
	ranks      [][]span // by global rank
	ppRank     []int    // each global rank's pipeline rank
}

// recorder collects one rank's spans while a traced iteration runs.
type recorder struct {
	t0    time.Time
	spans []span
}

func (r *recorder) record(e pp.Event) {
	r.spans = append(r.spans, span{kind: e.Action.Kind, mb: e.Action.Microbatch, chunk: e.Action.Chunk,
		start: e.Start.Sub(r.t0).Nanoseconds(), end: e.End.Sub(r.t0).Nanoseconds()})
}

// gatherTimeline collects every rank's spans on world rank 0 (nil
// elsewhere). Every rank must call it.
func (t *trainer) gatherTimeline(ctx context.Context, r *recorder) (*timeline, error) {
	w := t.groups.World
	mine := []int64{int64(t.pp.Rank())}
	for _, s := range r.spans {
		mine = append(mine, int64(s.kind), int64(s.mb), int64(s.chunk), s.start, s.end)
	}
	counts := make([]int64, w.Size())
	if err := w.AllGather(ctx, comm.I64(counts), comm.I64([]int64{int64(len(mine))})); err != nil {
		return nil, fmt.Errorf("--profile-schedule: gathering the timeline: %w", err)
	}
	n := make([]int, len(counts))
	total := 0
	for i, c := range counts {
		n[i] = int(c)
		total += n[i]
	}
	all := make([]int64, total)
	if err := w.AllGatherV(ctx, comm.I64(all), comm.I64(mine), n); err != nil {
		return nil, fmt.Errorf("--profile-schedule: gathering the timeline: %w", err)
	}
	if w.Rank() != 0 {
		return nil, nil
	}
	tl := &timeline{pp: t.pp.Size(), vpp: len(t.chunks), m: t.micro}
	off := 0
	for _, k := range n {
		rec := all[off : off+k]
		off += k
		tl.ppRank = append(tl.ppRank, int(rec[0]))
		var spans []span
		for i := 1; i+5 <= len(rec); i += 5 {
			spans = append(spans, span{kind: pp.Kind(rec[i]), mb: int(rec[i+1]), chunk: int(rec[i+2]), start: rec[i+3], end: rec[i+4]})
		}
		tl.ranks = append(tl.ranks, spans)
	}
	return tl, nil
}

// bounds returns the first start and the last end over every rank.
func (tl *timeline) bounds() (int64, int64) {
	var lo, hi int64 = 1 << 62, 0
	for _, spans := range tl.ranks {
		for _, s := range spans {
			lo, hi = min(lo, s.start), max(hi, s.end)
		}
	}
	if lo > hi {
		lo = hi
	}
	return lo, hi
}

// bubbles returns each rank's idle fraction: the part of the iteration's
// span (first action of any rank to last action of any rank) in which the
// rank ran no forward or backward step.
func (tl *timeline) bubbles() []float64 {
	lo, hi := tl.bounds()
	out := make([]float64, len(tl.ranks))
	for r, spans := range tl.ranks {
		var busy int64
		for _, s := range spans {
			if s.kind == pp.Forward || s.kind == pp.Backward {
				busy += s.end - s.start
			}
		}
		if hi > lo {
			out[r] = 1 - float64(busy)/float64(hi-lo)
		}
	}
	return out
}

// theoreticalBubble is the pipeline bubble fraction of a schedule with
// equal forward and backward times per stage: (P−1)/(V·M+P−1)
// (Narayanan et al. 2021, arXiv 2104.04473 §2.2; V = 1 for 1F1B).
func theoreticalBubble(p, v, m int) float64 {
	return float64(p-1) / float64(v*m+p-1)
}

// meanBubble is the mean of the ranks' idle fractions: the pipeline
// bubble plus the load imbalance between stages.
func meanBubble(b []float64) float64 {
	var s float64
	for _, x := range b {
		s += x
	}
	return s / float64(max(len(b), 1))
}

// bubble is the measured pipeline bubble: the idle fraction of the busiest
// rank, the one on the critical path. With balanced stages every rank idles
// (P−1)/(V·M+P−1) of the iteration; with unbalanced ones the lighter
// stages idle more, and that extra (meanBubble − bubble, roughly) is load
// imbalance, not the schedule's fill and drain.
func bubble(b []float64) float64 {
	if len(b) == 0 {
		return 0
	}
	return slices.Min(b)
}

// writeSVG draws the timeline: one row per rank, forward steps in blue,
// backward steps in orange (darker for later model chunks), labelled with
// their microbatch, P2P exchanges and waits in grey, idle time blank; the
// title gives the measured and theoretical bubble.
func (tl *timeline) writeSVG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--profile-schedule: %w", err)
	}
	if err := tl.svg(f); err != nil {
		f.Close()
		return fmt.Errorf("--profile-schedule: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--profile-schedule: %w", err)
	}
	return nil
}

func (tl *timeline) svg(w io.Writer) error {
	const width, left, rowH, top = 1200.0, 200.0, 34.0, 60.0
	lo, hi := tl.bounds()
	span := float64(max(hi-lo, 1))
	x := func(t int64) float64 { return left + (width-left-20)*float64(t-lo)/span }
	bub := tl.bubbles()
	height := top + rowH*float64(len(tl.ranks)) + 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("pipeline schedule, one iteration: PP %d, %d model chunk(s) per rank, %d microbatches, %.1f ms", tl.pp, tl.vpp, tl.m, span/1e6)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="40">measured bubble %.1f%% (the busiest rank's idle time), theoretical (P−1)/(V·M+P−1) = %.1f%%; mean idle time of the ranks %.1f%% (the rest is load imbalance between stages)</text>`+"\n",
		100*bubble(bub), 100*theoreticalBubble(tl.pp, tl.vpp, tl.m), 100*meanBubble(bub))
	for r, spans := range tl.ranks {
		y := top + rowH*float64(r)
		fmt.Fprintf(&b, `<text x="10" y="%.0f">rank %d (pp %d): idle %.1f%%</text>`+"\n", y+rowH/2+4, r, tl.ppRank[r], 100*bub[r])
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#ccc"/>`+"\n", left, y+2, width-left-20, rowH-4)
		for _, s := range spans {
			x0, x1 := x(s.start), x(s.end)
			fill, label := "", ""
			switch s.kind {
			case pp.Forward:
				fill, label = shade([3]int{66, 133, 244}, s.chunk, tl.vpp), fmt.Sprint(s.mb)
			case pp.Backward:
				fill, label = shade([3]int{244, 160, 0}, s.chunk, tl.vpp), fmt.Sprint(s.mb)
			case pp.Comm, pp.Wait:
				fill = "#bbbbbb"
			default:
				continue
			}
			hgt, yy := rowH-8, y+4
			if s.kind == pp.Comm || s.kind == pp.Wait {
				hgt, yy = (rowH-8)/3, y+rowH-4-(rowH-8)/3
			}
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`+"\n", x0, yy, max(x1-x0, 0.5), hgt, fill)
			if label != "" && x1-x0 > 12 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="white">%s</text>`+"\n", (x0+x1)/2, y+rowH/2+4, label)
			}
		}
	}
	ly := top + rowH*float64(len(tl.ranks)) + 25
	for i, l := range []struct{ fill, text string }{
		{shade([3]int{66, 133, 244}, 0, 1), "forward (number: microbatch; darker: later model chunk)"},
		{shade([3]int{244, 160, 0}, 0, 1), "backward"},
		{"#bbbbbb", "send/receive and waits"},
	} {
		lx := 10 + 380*float64(i)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="14" height="14" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", lx, ly, l.fill, lx+20, ly+11, html.EscapeString(l.text))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// shade darkens base for chunk c of v chunks.
func shade(base [3]int, c, v int) string {
	f := 1 - 0.45*float64(c)/float64(max(v, 1))
	return fmt.Sprintf("rgb(%d,%d,%d)", int(float64(base[0])*f), int(float64(base[1])*f), int(float64(base[2])*f))
}
