package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/gotron/gotron/moe"
)

// expertLoad is what a --log-json log recorded of a MoE model's routing:
// for every iteration record with MoE metrics, in file order, the tokens
// routed to each expert of each MoE layer.
type expertLoad struct {
	layers     []int
	experts    int
	iterations []int
	tokens     [][][]int64 // [record][layer][expert]
}

// maxLogLine bounds one line of a log: a record of many layers of many
// experts is long, but not this long.
const maxLogLine = 64 << 20

// readExpertLoad reads the MoE records of a --log-json log (JSON lines)
// from r; name is the file's name for errors. Lines without MoE metrics
// (a dense model's, validation lines) are skipped. A line that is not a
// JSON object, or a MoE record that is inconsistent in itself or with the
// file's first one, is an error naming the file and the line. A log with
// no MoE record is refused with the fix.
func readExpertLoad(r io.Reader, name string) (*expertLoad, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLogLine)
	l := &expertLoad{}
	firstLine, line, iterations := 0, 0, 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if b[0] != '{' {
			return nil, fmt.Errorf("%s:%d: not a JSON object: this is not a log of gotron train --log-json", name, line)
		}
		var rec struct {
			Iteration *int         `json:"iteration"`
			ValidLoss *float64     `json:"valid_loss"`
			MoE       *moe.Metrics `json:"moe"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %v: not a record of gotron train --log-json (a run killed while writing leaves a cut-off last line: delete it)", name, line, oneLine(err))
		}
		if rec.ValidLoss == nil && rec.Iteration != nil {
			iterations++
		}
		if rec.MoE == nil {
			continue
		}
		if rec.Iteration == nil || *rec.Iteration < 1 {
			return nil, fmt.Errorf("%s:%d: a \"moe\" record without an iteration number of at least 1: not a record of gotron train --log-json", name, line)
		}
		tokens, err := l.check(rec.MoE, firstLine)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if firstLine == 0 {
			firstLine = line
		}
		l.iterations = append(l.iterations, *rec.Iteration)
		l.tokens = append(l.tokens, tokens)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: a line longer than %d MiB: not a log of gotron train --log-json", name, line+1, maxLogLine>>20)
		}
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(l.tokens) == 0 {
		what := "no records"
		if iterations > 0 {
			what = fmt.Sprintf("%d iteration record(s) and none with MoE metrics (\"moe\")", iterations)
		}
		return nil, fmt.Errorf("%s holds %s: plot the --log-json log of a MoE model's run (gotron train --num-experts N ... --log-json FILE)", name, what)
	}
	return l, nil
}

// check validates a MoE record against itself and the file's first one
// (at line first; 0: this is the first) and returns its token counts.
func (l *expertLoad) check(m *moe.Metrics, first int) ([][]int64, error) {
	n := len(m.Layers)
	if n == 0 {
		return nil, fmt.Errorf("the \"moe\" record lists no layers")
	}
	for i, x := range m.Layers {
		if x < 0 || i > 0 && x <= m.Layers[i-1] {
			return nil, fmt.Errorf("the \"moe\" record's layers %v are not increasing layer indices", m.Layers)
		}
	}
	if len(m.TokensPerExpert) != n {
		return nil, fmt.Errorf("the \"moe\" record has %d rows of tokens_per_expert for %d layers", len(m.TokensPerExpert), n)
	}
	e := len(m.TokensPerExpert[0])
	if e == 0 {
		return nil, fmt.Errorf("the \"moe\" record's tokens_per_expert has no experts")
	}
	for i, row := range m.TokensPerExpert {
		if len(row) != e {
			return nil, fmt.Errorf("the \"moe\" record counts tokens for %d experts in layer %d and %d in layer %d", e, m.Layers[0], len(row), m.Layers[i])
		}
		for j, t := range row {
			if t < 0 {
				return nil, fmt.Errorf("the \"moe\" record counts %d tokens for expert %d of layer %d", t, j, m.Layers[i])
			}
		}
	}
	for _, loss := range []struct {
		name string
		v    []float64
	}{{"load_balancing_loss", m.LoadBalancingLoss}, {"seq_load_balancing_loss", m.SeqLoadBalancingLoss}, {"z_loss", m.ZLoss}} {
		if loss.v != nil && len(loss.v) != n {
			return nil, fmt.Errorf("the \"moe\" record has %d values of %s for %d layers", len(loss.v), loss.name, n)
		}
	}
	if first == 0 {
		l.layers, l.experts = slices.Clone(m.Layers), e
	} else if !slices.Equal(m.Layers, l.layers) || e != l.experts {
		return nil, fmt.Errorf("MoE layers %v of %d experts, but line %d has layers %v of %d experts: the file mixes the logs of different models", m.Layers, e, first, l.layers, l.experts)
	}
	return m.TokensPerExpert, nil
}

// oneLine returns err's message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// shares returns each expert's share of the tokens of layer i over the
// records [lo, hi), NaN for every expert when they hold no tokens.
func (l *expertLoad) shares(i, lo, hi int) []float64 {
	out := make([]float64, l.experts)
	var total float64
	for r := lo; r < hi; r++ {
		for e, t := range l.tokens[r][i] {
			out[e] += float64(t)
			total += float64(t)
		}
	}
	for e := range out {
		if total > 0 {
			out[e] /= total
		} else {
			out[e] = math.NaN()
		}
	}
	return out
}

// extremes returns the most and the least loaded expert of shares (the
// lowest index on a tie), or -1, -1 when there are no tokens.
func extremes(shares []float64) (most, least int) {
	most, least = -1, -1
	for e, s := range shares {
		if math.IsNaN(s) {
			return -1, -1
		}
		if most < 0 || s > shares[most] {
			most = e
		}
		if least < 0 || s < shares[least] {
			least = e
		}
	}
	return most, least
}

// iterationRange describes the records' iterations: "iteration 7" or
// "iterations 1–20".
func (l *expertLoad) iterationRange() string {
	a, b := l.iterations[0], l.iterations[len(l.iterations)-1]
	if len(l.iterations) == 1 {
		return fmt.Sprintf("iteration %d", a)
	}
	return fmt.Sprintf("iterations %d–%d", a, b)
}

// summary is the one-line summary: each layer's most and least loaded
// expert over the whole run, as shares of the layer's routed tokens.
func (l *expertLoad) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "expert load over %d record(s), %s; shares of each layer's routed tokens over the run (balanced 1/%d = %.1f%%):",
		len(l.tokens), l.iterationRange(), l.experts, 100/float64(l.experts))
	for i, layer := range l.layers {
		if i > 0 {
			b.WriteByte(';')
		}
		s := l.shares(i, 0, len(l.tokens))
		most, least := extremes(s)
		if most < 0 {
			fmt.Fprintf(&b, " layer %d no tokens routed", layer)
			continue
		}
		fmt.Fprintf(&b, " layer %d most expert %d %.1f%%, least expert %d %.1f%%", layer, most, 100*s[most], least, 100*s[least])
	}
	return b.String()
}

// maxColumns is the most columns a heat map has: longer runs add the
// tokens of consecutive iterations in a column.
const maxColumns = 200

// Heat-map colours: blue for no tokens, white for the balanced share,
// red for the largest share of the run; grey where a column has no
// tokens.
var (
	loadLow  = [3]float64{33, 102, 172}
	loadMid  = [3]float64{247, 247, 247}
	loadHigh = [3]float64{178, 24, 43}
)

const noTokensFill = "#bbbbbb"

func mix(a, b [3]float64, t float64) string {
	t = min(max(t, 0), 1)
	return fmt.Sprintf("rgb(%d,%d,%d)", int(math.Round(a[0]+(b[0]-a[0])*t)), int(math.Round(a[1]+(b[1]-a[1])*t)), int(math.Round(a[2]+(b[2]-a[2])*t)))
}

// loadColour is the colour of share s with balanced share bal and the
// scale's top hi.
func loadColour(s, bal, hi float64) string {
	switch {
	case math.IsNaN(s):
		return noTokensFill
	case s <= bal:
		return mix(loadLow, loadMid, s/bal)
	case hi <= bal:
		return mix(loadMid, loadHigh, 1)
	}
	return mix(loadMid, loadHigh, (s-bal)/(hi-bal))
}

// svg draws one heat map per MoE layer, one under the other: a row per
// expert, a column per iteration (or per run of consecutive iterations
// when there are more than maxColumns records), each cell coloured by the
// expert's share of the layer's tokens in that column; a colour scale at
// the bottom. name is the log's name for the title.
func (l *expertLoad) svg(w io.Writer, name string) error {
	const left, plotW, right, top, panelGap = 120.0, 900.0, 30.0, 60.0, 56.0
	n := len(l.tokens)
	cols := min(n, maxColumns)
	bounds := make([]int, cols+1)
	for c := range bounds {
		bounds[c] = c * n / cols
	}
	cellW := plotW / float64(cols)
	rowH := math.Min(14, math.Max(3, math.Floor(160/float64(l.experts))))
	labelEvery := int(math.Ceil(11 / rowH))
	bal := 1 / float64(l.experts)
	// The scale's top: the largest share of any cell, at least twice the
	// balanced share (so that white stays in the middle of a balanced run).
	hi := math.Min(1, 2*bal)
	grid := make([][][]float64, len(l.layers)) // [layer][column][expert]
	for i := range l.layers {
		grid[i] = make([][]float64, cols)
		for c := range cols {
			grid[i][c] = l.shares(i, bounds[c], bounds[c+1])
			for _, s := range grid[i][c] {
				if !math.IsNaN(s) {
					hi = math.Max(hi, s)
				}
			}
		}
	}
	panelH := rowH*float64(l.experts) + panelGap
	height := top + panelH*float64(len(l.layers)) + 70
	width := left + plotW + right
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("expert load: each expert's share of a MoE layer's routed tokens, %s of %s", l.iterationRange(), name)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">%s</text>`+"\n", html.EscapeString(title))
	per := "one column per iteration"
	if cols < n {
		per = fmt.Sprintf("one column per %d or %d consecutive iterations (their tokens added)", n/cols, (n+cols-1)/cols)
	}
	fmt.Fprintf(&b, `<text x="10" y="40">%d experts per layer, one row each; %s; white is the balanced share 1/%d = %.1f%%</text>`+"\n", l.experts, html.EscapeString(per), l.experts, 100*bal)
	whole := make([][]float64, len(l.layers))
	for i := range l.layers {
		whole[i] = l.shares(i, 0, n)
	}
	for i, layer := range l.layers {
		y0 := top + panelH*float64(i) + 16
		label := fmt.Sprintf("layer %d", layer)
		if most, least := extremes(whole[i]); most >= 0 {
			label += fmt.Sprintf(" — over the run: most loaded expert %d (%.1f%%), least loaded expert %d (%.1f%%)", most, 100*whole[i][most], least, 100*whole[i][least])
		} else {
			label += " — no tokens routed"
		}
		fmt.Fprintf(&b, `<text x="10" y="%.1f" font-size="12">%s</text>`+"\n", y0-4, html.EscapeString(label))
		for e := range l.experts {
			y := y0 + rowH*float64(e)
			if e%labelEvery == 0 {
				fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">expert %d</text>`+"\n", left-6, y+rowH/2+4, e)
			}
			// Neighbouring cells of one colour are drawn as one box.
			for c := 0; c < cols; {
				fill := loadColour(grid[i][c][e], bal, hi)
				end := c + 1
				for end < cols && loadColour(grid[i][end][e], bal, hi) == fill {
					end++
				}
				fmt.Fprintf(&b, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`+"\n", left+cellW*float64(c), y, cellW*float64(end-c), rowH, fill)
				c = end
			}
		}
		yb := y0 + rowH*float64(l.experts)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.0f" height="%.1f" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, yb-y0)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f">iteration %d</text>`+"\n", left, yb+14, l.iterations[0])
		if n > 1 {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">iteration %d</text>`+"\n", left+plotW, yb+14, l.iterations[n-1])
		}
		if cols >= 8 {
			// The middle column's first iteration.
			c := cols / 2
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">iteration %d</text>`+"\n", left+cellW*(float64(c)+0.5), yb+14, l.iterations[bounds[c]])
		}
	}
	// The colour scale.
	ys := top + panelH*float64(len(l.layers)) + 10
	const scaleW = 360.0
	mid := (bal) / hi
	if hi <= bal {
		mid = 1
	}
	fmt.Fprintf(&b, `<defs><linearGradient id="load"><stop offset="0" stop-color="%s"/><stop offset="%.4f" stop-color="%s"/><stop offset="1" stop-color="%s"/></linearGradient></defs>`+"\n",
		mix(loadLow, loadMid, 0), mid, mix(loadLow, loadMid, 1), loadColour(hi, bal, hi))
	fmt.Fprintf(&b, `<text x="10" y="%.1f">token share</text>`+"\n", ys+12)
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.0f" height="14" fill="url(#load)" stroke="#999"/>`+"\n", left, ys, scaleW)
	for _, t := range []struct {
		at     float64
		anchor string
		text   string
	}{
		{0, "start", "0%"},
		{mid, "middle", fmt.Sprintf("balanced %.1f%%", 100*bal)},
		{1, "end", fmt.Sprintf("%.1f%%", 100*hi)},
	} {
		x := left + scaleW*t.at
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/><text x="%.1f" y="%.1f" text-anchor="%s">%s</text>`+"\n", x, ys+14, x, ys+19, x, ys+31, t.anchor, html.EscapeString(t.text))
	}
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="14" height="14" fill="%s"/><text x="%.0f" y="%.1f">no tokens routed</text>`+"\n", left+scaleW+40, ys, noTokensFill, left+scaleW+60, ys+11)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
