package gpt

import (
	"fmt"
	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor/kernels"
)

// norm applies the configured normalisation (LayerNorm or RMSNorm,
// zero-centred or not) with weight w and bias b (nil for RMSNorm).
func (m *Model) norm(t *autograd.Tape, x *autograd.Var, w, b *nn.Parameter) *autograd.Var {
	var bv *autograd.Var
	if b != nil {
		bv = b.Var
	}
	return nn.Norm(t, x, w.Var, bv, m.normOptions())
}

func (m *Model) normOptions() nn.NormOptions {
	c := m.Config
	return nn.NormOptions{RMS: c.RMSNorm(), Eps: c.LayernormEpsilon, ZeroCentered: c.LayernormZeroCenteredGamma}
}

// activation is the MLP's (and the experts') activation kernel.
func activation(c config.TransformerConfig) kernels.Activation {
	switch c.Activation() {
	case config.SiLU:
		return kernels.SiLU
	case config.SquaredReLU:
		return kernels.SquaredReLU
	}
	if c.TanhGELU() {
		return kernels.GELUTanh
	}
	return kernels.GELUErf
}

// qkvLayout is this rank's part of linear_qkv's output: n/tp query heads
// in g/tp groups of d channels.
func (m *Model) qkvLayout() nn.QKVLayout {
	c, ws := m.Config, m.tpSize()
	return nn.QKVLayout{Heads: c.NumAttentionHeads / ws, Groups: c.QueryGroups() / ws, Dim: c.HeadDim()}
}

// qkvOptions are the layer's q/k norms and the pass's rotary table.
func (l *Layer) qkvOptions(m *Model, ps *pass) nn.QKVOptions {
	o := nn.QKVOptions{Rotary: ps.rope, RotaryRows: ps.ropeRows}
	if l.QLayernormW != nil {
		no := m.normOptions()
		qk := func(w, b *nn.Parameter) *nn.QKNorm {
			n := &nn.QKNorm{W: w.Var, NormOptions: no}
			if b != nil {
				n.B = b.Var
			}
			return n
		}
		o.QNorm, o.KNorm = qk(l.QLayernormW, l.QLayernormB), qk(l.KLayernormW, l.KLayernormB)
	}
	return o
}

// OutputLayerWeight is the output layer's weight: its own when untied,
// else the word embedding (on a pipeline's last stage, its copy there).
// defer_embedding_wgrad_compute defers its weight gradients.
func (m *Model) OutputLayerWeight() *nn.Parameter {
	if m.OutputWeight != nil {
		return m.OutputWeight
	}
	return m.WordEmbeddings
}

// rotary returns the RoPE table of a pass over s local tokens per sequence
// (nil without RoPE): row i holds sequence index i's position, 0..s−1, or
// under context parallelism the rank's chunks of the whole sequence
// (cp.Positions). Sequence parallelism changes nothing: linear_qkv's
// output holds the rank's whole local sequence. Without context
// parallelism one table of max(s, seq_length) positions serves every
// shorter pass (generation runs every length); with it the table of the
// last length is kept.
func (m *Model) rotary(s int) (*kernels.RotaryTable, error) {
	c := m.Config
	spec, ok := c.Rotary()
	if !ok {
		return nil, nil
	}
	m.ropeMu.Lock()
	defer m.ropeMu.Unlock()
	n := m.CP.Size()
	if t := m.rope; t != nil && (n == 1 && m.ropeLen >= s || m.ropeLen == s) {
		return t, nil
	}
	var pos []int
	if n > 1 {
		pos = cp.Positions(s*n, n, m.CP.Rank())
	} else {
		pos = make([]int, max(s, c.SeqLength))
		for i := range pos {
			pos[i] = i
		}
	}
	t, err := rotaryTable(pos, spec)
	if err != nil {
		return nil, err
	}
	m.rope, m.ropeLen = t, len(pos)
	if n > 1 {
		m.ropeLen = s
	}
	return t, nil
}

// rotaryTable is the table of positions pos for the rotary embedding spec.
func rotaryTable(pos []int, spec config.RotarySpec) (*kernels.RotaryTable, error) {
	if spec.Rot < 2 || spec.Rot%2 != 0 || spec.InvFreq != nil && len(spec.InvFreq) != spec.Rot/2 {
		return nil, fmt.Errorf("gpt: rotary embeddings of %d channels (%d frequencies): the count must be even and at least 2", spec.Rot, len(spec.InvFreq))
	}
	inv := spec.InvFreq
	if inv == nil {
		inv = kernels.RotaryInvFreq(spec.Rot, spec.Base)
	}
	return kernels.NewRotaryTableOf(pos, inv, spec.Interleaved, spec.Factor), nil
}
