package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// newPlotLossCmd is `gotron plot loss --log-json FILE [--log-json FILE …]
// [--out SVG]`.
func newPlotLossCmd() *cobra.Command {
	var logs []string
	var out string
	cmd := &cobra.Command{
		Use:   "loss --log-json FILE [--log-json FILE ...] [--out loss.svg]",
		Short: "Draw training and validation loss, learning rate and gradient norm against iterations (SVG)",
		Long: `loss reads the --log-json logs of one or more training runs (gotron train
... --log-json FILE) and draws three panels against the iteration: the
training loss (a line) with the validation loss (dots), the learning rate,
and the gradient norm (skipped steps left out). Each run has its colour,
named by its file in the legend, so two layouts' curves can be laid over
each other. It prints one line per run: its iterations, last training loss
and lowest validation loss.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(logs) == 0 {
				return fmt.Errorf("--log-json: give the log of a run (gotron train ... --log-json FILE), once per run to compare")
			}
			var runs []*lossRun
			for _, path := range logs {
				r, err := readLossLogFile(path)
				if err != nil {
					return err
				}
				runs = append(runs, r)
			}
			if err := writeSVGFile(out, func(w io.Writer) error { return lossSVG(w, runs) }); err != nil {
				return err
			}
			for _, r := range runs {
				fmt.Fprintln(cmd.OutOrStdout(), r.summary())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "written to %s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&logs, "log-json", nil, "a run's JSON-lines log (gotron train --log-json); repeat to compare runs")
	f.StringVar(&out, "out", "loss.svg", "the SVG file to write")
	return cmd
}

// writeSVGFile creates path (--out) and draws into it; every plot writes
// its picture so.
func writeSVGFile(path string, draw func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := draw(f); err != nil {
		f.Close()
		return fmt.Errorf("--out %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

// lossRun is one run's curves: training iterations with their loss,
// learning rate and gradient norm (NaN for a skipped step), and the
// validation losses.
type lossRun struct {
	name               string
	it                 []float64
	loss, lr, gradNorm []float64
	validIt, valid     []float64
}

func readLossLogFile(path string) (*lossRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--log-json: %w", err)
	}
	defer f.Close()
	return readLossLog(f, path)
}

// readLossLog reads a --log-json log: the iteration records (iteration,
// loss, lr, grad_norm) and the validation ones (iteration, valid_loss).
// An error is one line naming the file and line.
func readLossLog(r io.Reader, name string) (*lossRun, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLogLine)
	run := &lossRun{name: name}
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec struct {
			Iteration *int     `json:"iteration"`
			Loss      *float64 `json:"loss"`
			LR        *float64 `json:"lr"`
			GradNorm  *float64 `json:"grad_norm"`
			ValidLoss *float64 `json:"valid_loss"`
		}
		if b[0] != '{' || json.Unmarshal(b, &rec) != nil {
			return nil, fmt.Errorf("%s:%d: not a record of gotron train --log-json (a run killed while writing leaves a cut-off last line: delete it)", name, line)
		}
		if rec.Iteration == nil || *rec.Iteration < 0 {
			return nil, fmt.Errorf("%s:%d: a record without an iteration number: not a log of gotron train --log-json", name, line)
		}
		x := float64(*rec.Iteration)
		switch {
		case rec.ValidLoss != nil:
			run.validIt, run.valid = append(run.validIt, x), append(run.valid, *rec.ValidLoss)
		case rec.Loss != nil && rec.LR != nil:
			norm := math.NaN()
			if rec.GradNorm != nil {
				norm = *rec.GradNorm
			}
			run.it, run.loss, run.lr, run.gradNorm = append(run.it, x), append(run.loss, *rec.Loss), append(run.lr, *rec.LR), append(run.gradNorm, norm)
		default:
			return nil, fmt.Errorf("%s:%d: a record with neither a training loss and learning rate nor a validation loss: not a log of gotron train --log-json", name, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, oneLine(err))
	}
	if len(run.it) == 0 {
		return nil, fmt.Errorf("%s: no training iterations: the log of a run that trained at least one iteration is needed", name)
	}
	return run, nil
}

// summary is the run's line: iterations, last loss, lowest validation loss.
func (r *lossRun) summary() string {
	s := fmt.Sprintf("%s: %d iterations (%g to %g), last training loss %.4f", r.name, len(r.it), r.it[0], r.it[len(r.it)-1], r.loss[len(r.loss)-1])
	if len(r.valid) > 0 {
		best := 0
		for i, v := range r.valid {
			if v < r.valid[best] {
				best = i
			}
		}
		s += fmt.Sprintf(", lowest validation loss %.4f at iteration %g", r.valid[best], r.validIt[best])
	}
	return s
}

// lossPanel is one panel: its title and each run's points.
type lossPanel struct {
	title string
	xs    func(*lossRun) ([]float64, []float64) // line
	dots  func(*lossRun) ([]float64, []float64) // markers, or nil
}

var lossColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"}

// lossSVG draws the runs' three panels.
func lossSVG(w io.Writer, runs []*lossRun) error {
	const left, plotW, right, top, panelH, gap = 90.0, 860.0, 30.0, 50.0, 200.0, 50.0
	panels := []lossPanel{
		{"training loss (line), validation loss (dots)", func(r *lossRun) ([]float64, []float64) { return r.it, r.loss },
			func(r *lossRun) ([]float64, []float64) { return r.validIt, r.valid }},
		{"learning rate", func(r *lossRun) ([]float64, []float64) { return r.it, r.lr }, nil},
		{"gradient norm", func(r *lossRun) ([]float64, []float64) { return r.it, r.gradNorm }, nil},
	}
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		for _, xs := range [][]float64{r.it, r.validIt} {
			for _, x := range xs {
				xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
			}
		}
	}
	width := left + plotW + right
	height := top + (panelH+gap)*float64(len(panels)) + 20*float64(len(runs)) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="24" font-size="14">%s</text>`+"\n", html.EscapeString(fmt.Sprintf("training curves of %d run(s) against the iteration", len(runs))))
	for p, pn := range panels {
		y0 := top + float64(p)*(panelH+gap)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range runs {
			for _, get := range []func(*lossRun) ([]float64, []float64){pn.xs, pn.dots} {
				if get == nil {
					continue
				}
				_, ys := get(r)
				for _, y := range ys {
					if !math.IsNaN(y) && !math.IsInf(y, 0) {
						lo, hi = math.Min(lo, y), math.Max(hi, y)
					}
				}
			}
		}
		if math.IsInf(lo, 0) { // nothing finite to draw
			lo, hi = 0, 1
		}
		ax := newAxis(xlo, xhi, left, left+plotW)
		ay := newAxis(lo, hi, y0+panelH, y0)
		drawFrame(&b, pn.title, ax, ay, y0, left, plotW, panelH)
		for i, r := range runs {
			col := lossColours[i%len(lossColours)]
			xs, ys := pn.xs(r)
			drawLine(&b, ax, ay, xs, ys, col)
			if pn.dots != nil {
				xs, ys := pn.dots(r)
				for k := range xs {
					if !math.IsNaN(ys[k]) && !math.IsInf(ys[k], 0) {
						fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="black" stroke-width="0.5"/>`+"\n", ax.at(xs[k]), ay.at(ys[k]), col)
					}
				}
			}
		}
	}
	ly := top + (panelH+gap)*float64(len(panels))
	for i, r := range runs {
		y := ly + 20*float64(i)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="14" height="4" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left, y-4, lossColours[i%len(lossColours)], left+20, y, html.EscapeString(filepath.Base(r.name)+" — "+r.summary()))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// axis maps data values in [lo, hi] onto pixels [p0, p1].
type axis struct{ lo, hi, p0, p1 float64 }

func newAxis(lo, hi, p0, p1 float64) axis {
	if hi <= lo {
		lo, hi = lo-1, hi+1
	}
	return axis{lo, hi, p0, p1}
}

func (a axis) at(v float64) float64 { return a.p0 + (v-a.lo)/(a.hi-a.lo)*(a.p1-a.p0) }

// ticks returns about n round values in [lo, hi] (none for a range
// float64 cannot step through).
func (a axis) ticks(n int) []float64 {
	step := math.Pow(10, math.Floor(math.Log10((a.hi-a.lo)/float64(n))))
	for _, m := range []float64{1, 2, 5, 10} {
		if (a.hi-a.lo)/(step*m) <= float64(n) {
			step *= m
			break
		}
	}
	if !(step > 0) || math.IsInf(step, 0) {
		return nil
	}
	var out []float64
	for v := math.Ceil(a.lo/step) * step; v <= a.hi+step*1e-9 && len(out) <= 2*n; v += step {
		out = append(out, v)
	}
	return out
}

// drawFrame draws a panel's box, title and ticks.
func drawFrame(b *strings.Builder, title string, ax, ay axis, y0, left, plotW, panelH float64) {
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="12">%s</text>`+"\n", left, y0-8, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, panelH)
	for _, v := range ax.ticks(8) {
		x := ax.at(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n", x, y0, x, y0+panelH, x, y0+panelH+14, v)
	}
	for _, v := range ay.ticks(5) {
		y := ay.at(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end">%.4g</text>`+"\n", left, y, left+plotW, y, left-6, y+4, v)
	}
}

// drawLine draws the finite points of (xs, ys) as polylines, broken at
// the missing ones.
func drawLine(b *strings.Builder, ax, ay axis, xs, ys []float64, col string) {
	var pts []string
	flush := func() {
		if len(pts) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	for k := range xs {
		if math.IsNaN(ys[k]) || math.IsInf(ys[k], 0) {
			flush()
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", ax.at(xs[k]), ay.at(ys[k])))
	}
	flush()
}
