package gpt

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// packingConfig is a two-layer model of 16-token rows in the named preset
// ("": learned absolute positions; "llama" and "qknorm": RoPE).
func packingConfig(preset string) config.TransformerConfig {
	c := presetConfig(preset)
	c.NumLayers, c.SeqLength = 2, 16
	return c
}

// packedRun is one forward and backward pass of a fresh model (seed 7) on
// a micro-batch: the per-token losses in row-major [b, s] order, and every
// parameter's gradient of Σ weight⊙loss over the tokens weight marks
// ([b, s], row-major).
func packedRun(t *testing.T, cfg config.TransformerConfig, in Inputs, weight []float32) (losses []float32, grads map[string][]float32) {
	t.Helper()
	m, err := New(cfg, rng.New(7))
	if err != nil {
		t.Fatal(err)
	}
	tape := autograd.NewTape(t.Context())
	out, err := m.ForwardInputs(tape, in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, s := in.Rows, in.Seq
	sf := out.Value.Data() // [s·b], sequence-first
	losses = make([]float32, b*s)
	for j := range b {
		for i := range s {
			losses[j*s+i] = sf[i*b+j]
		}
	}
	w := SequenceFirst(weight, b, s)
	if err := autograd.Backward(tape, autograd.WeightedSum(tape, out, tensor.FromSlice(w, len(w))), nil); err != nil {
		t.Fatal(err)
	}
	grads = map[string][]float32{}
	for _, p := range m.Parameters() {
		grads[p.Name] = p.Grad.Data()
	}
	return losses, grads
}

// TestPackedDocumentsAreIndependent is the packing identity: a row holding
// document A (6 tokens) then document B (10 tokens), with positions reset
// at B and B's tokens in their own segment, gives B's tokens the per-token
// losses of a row holding B alone (then 6 tokens of padding, which causal
// attention keeps B from seeing) to 1e-5 relative, and the gradient of B's
// summed losses equals the lone row's to 1e-5 (‖g − g₁‖/‖g₁‖ per
// parameter) — for learned absolute positions and for RoPE (full and
// partial, interleaved). A's tokens keep the losses of A alone. The packed
// row rides in a micro-batch with a second, unpacked row, so positions and
// segments are read per row.
func TestPackedDocumentsAreIndependent(t *testing.T) {
	const la, lb, s = 6, 10, 16
	for _, preset := range []string{"", "llama", "qknorm"} {
		t.Run("preset="+preset, func(t *testing.T) {
			cfg := packingConfig(preset)
			v := int32(cfg.VocabSize)
			g := rng.New(11)
			tok := func(n int) []int32 {
				out := make([]int32, n)
				for i := range out {
					out[i] = int32(g.Uint64n(uint64(v)))
				}
				return out
			}
			docA, docB, other := tok(la+1), tok(lb+1), tok(s+1) // inputs and next-token labels
			pad := tok(la)
			// The micro-batch: row 0 packs A then B, row 1 is another sequence.
			packed := Inputs{Rows: 2, Seq: s,
				IDs:         concat(docA[:la], docB[:lb], other[:s]),
				Labels:      concat(docA[1:], docB[1:], other[1:]),
				PositionIDs: concat(countUp(la), countUp(lb), countUp(s)),
				Segments:    concat(fill(la, 0), fill(lb, 1), fill(s, 4)),
			}
			onlyB := concat(fill(la, 0), fill(lb, 1), fill(s, 0))
			lp, gp := packedRun(t, cfg, packed, floats(onlyB))
			// B alone, then padding; and A alone, then padding: plain rows.
			alone := Inputs{Rows: 1, Seq: s, IDs: concat(docB[:lb], pad), Labels: concat(docB[1:], pad)}
			la1, ga := packedRun(t, cfg, alone, floats(concat(fill(lb, 1), fill(la, 0))))
			aloneA := Inputs{Rows: 1, Seq: s, IDs: concat(docA[:la], tok(lb)), Labels: concat(docA[1:], tok(lb))}
			lA, _ := packedRun(t, cfg, aloneA, floats(fill(s, 1)))

			closeRel(t, "B's losses, packed vs alone", lp[la:s], la1[:lb], 1e-5)
			closeRel(t, "A's losses, packed vs alone", lp[:la], lA[:la], 1e-5)
			worst := 0.0
			for name, want := range ga {
				e := numtest.RelNorm(gp[name], want)
				worst = max(worst, e)
				if e > 1e-5 {
					t.Errorf("gradient of B's losses, %s: ‖g − g₁‖/‖g₁‖ = %.2g > 1e-5", name, e)
				}
			}
			t.Logf("largest relative gradient difference %.2g", worst)

			// Without the segments B sees A: its losses move.
			unmasked := packed
			unmasked.Segments = nil
			lu, _ := packedRun(t, cfg, unmasked, floats(onlyB))
			if d := maxRel(lu[la:s], la1[:lb]); d < 1e-4 {
				t.Errorf("B's losses without the document mask are within %.2g of B alone: the test cannot tell", d)
			}
		})
	}
}

// TestDefaultPositionsAndOneSegment: position ids 0..s−1 and one segment
// per row give the losses of Forward without them, bit for bit.
func TestDefaultPositionsAndOneSegment(t *testing.T) {
	for _, preset := range []string{"", "llama"} {
		cfg := packingConfig(preset)
		const b, s = 2, 16
		ids, labels := make([]int32, b*s), make([]int32, b*s)
		for i := range ids {
			ids[i], labels[i] = int32(i*7%cfg.VocabSize), int32(i*3%cfg.VocabSize)
		}
		ones := floats(fill(b*s, 1))
		want, _ := packedRun(t, cfg, Inputs{IDs: ids, Labels: labels, Rows: b, Seq: s}, ones)
		got, _ := packedRun(t, cfg, Inputs{IDs: ids, Labels: labels, Rows: b, Seq: s,
			PositionIDs: concat(countUp(s), countUp(s)), Segments: concat(fill(s, 3), fill(s, 9))}, ones)
		numtest.SameBits(t, fmt.Sprintf("preset %q: losses", preset), got, want)
	}
}

// TestPackingInputErrors: position ids outside the table, and position
// ids or segments of the wrong length, are errors naming the place.
func TestPackingInputErrors(t *testing.T) {
	cfg := packingConfig("")
	m, err := New(cfg, rng.New(7))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, 2*16)
	pos := concat(countUp(16), countUp(16))
	pos[16+5] = int32(cfg.MaxPositions())
	for _, c := range []struct {
		in   Inputs
		want string
	}{
		{Inputs{IDs: ids, Labels: ids, Rows: 2, Seq: 16, PositionIDs: pos}, fmt.Sprintf("position id %d at row 1, position 5 is outside [0, max_position_embeddings = %d)", cfg.MaxPositions(), cfg.MaxPositions())},
		{Inputs{IDs: ids, Labels: ids, Rows: 2, Seq: 16, PositionIDs: countUp(16)}, "16 position ids for a [2, 16] micro-batch"},
		{Inputs{IDs: ids, Labels: ids, Rows: 2, Seq: 16, Segments: fill(31, 0)}, "31 segment ids for a micro-batch of 2 rows of 16 positions"},
	} {
		_, err := m.ForwardInputs(autograd.NewTape(t.Context()), c.in, nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
}

func concat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func countUp(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func fill(n int, v int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func floats(x []int32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// maxRel is max_i |a_i − b_i| / |b_i|.
func maxRel(a, b []float32) float64 {
	worst := 0.0
	for i := range b {
		d := float64(a[i]) - float64(b[i])
		if d < 0 {
			d = -d
		}
		worst = max(worst, d/max(float64(b[i]), -float64(b[i]), 1e-30))
	}
	return worst
}

// closeRel fails t unless every a_i is within tol relative of b_i.
func closeRel(t *testing.T, what string, a, b []float32, tol float64) {
	t.Helper()
	if d := maxRel(a, b); d > tol {
		t.Errorf("%s: largest relative difference %.2g > %g (%v vs %v)", what, d, tol, a, b)
	}
}
