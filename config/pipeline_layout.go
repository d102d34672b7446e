package config

import (
	"fmt"
	"strings"
)

// LayerType is one entry of a pipeline layout: the letter the layout string
// uses for it (megatron/core/transformer/enums.py LayerType, restricted to
// what a layout string can name).
type LayerType byte

// The layer types of a layout string.
const (
	LayerEmbedding LayerType = 'E' // the word and position embeddings (pre_process)
	LayerDecoder   LayerType = 't' // one transformer decoder layer
	LayerMTP       LayerType = 'm' // one multi-token-prediction layer
	LayerLoss      LayerType = 'L' // the output layer and loss (post_process), and the final layernorm without MTP layers
)

// Letter returns the layout-string letter of t ("E", "t", "m" or "L").
func (t LayerType) Letter() string { return string(rune(t)) }

// String returns the reference's name of t: "embedding", "decoder", "mtp" or
// "loss".
func (t LayerType) String() string {
	switch t {
	case LayerEmbedding:
		return "embedding"
	case LayerDecoder:
		return "decoder"
	case LayerMTP:
		return "mtp"
	case LayerLoss:
		return "loss"
	}
	return fmt.Sprintf("LayerType(%q)", rune(t))
}

// validLayerType reports whether r is one of the four layer letters.
func validLayerType(r rune) bool {
	switch LayerType(r) {
	case LayerEmbedding, LayerDecoder, LayerMTP, LayerLoss:
		return r < 0x80
	}
	return false
}

// PipelineLayout is a parsed pipeline_model_parallel_layout: which layers
// each model chunk (pipeline rank p, virtual stage v) holds
// (megatron/core/transformer/pipeline_parallel_layer_layout.py).
//
// The layout string lists S = pp·vpp stages separated by '|'. Stage s belongs
// to pipeline rank p = s mod pp and virtual stage v = s div pp, i.e.
// s = v·pp + p, so the stages in string order are the model's layers in
// order: v-major, then p. vpp = S/pp.
//
// A PipelineLayout is immutable once parsed; its methods never modify it.
type PipelineLayout struct {
	src    string        // the string as given
	pp     int           // pipeline_model_parallel_size
	vpp    int           // S / pp
	stages [][]LayerType // the expanded 1D stage list, stage s = v·pp + p
	pos    [][]int       // pos[s][i]: rune index in src of the character stages[s][i] came from
}

// ParsePipelineLayout parses and expands a layout string for
// pipelineModelParallelSize pipeline ranks. It checks the characters and
// that the number of stages is a multiple of the pipeline size; the layers
// themselves are checked by Validate.
//
// The grammar (docs/SEMANTICS.md § Pipeline layout strings), after removing
// every ',' (commas are cosmetic):
//
//	layout := stage ('|' stage)*        empty stages are allowed
//	stage  := item*
//	item   := 'E' | 't' | 'm' | 'L' | '(' body ')*' N | c '*' N     N = [0-9]+
//
// Expansion is the reference's two regular-expression substitutions, each
// applied once, left to right, without recursion: first `\(([^)]+)\)\*(\d+)`
// (a parenthesised body, which may contain '|' but not ')', repeated N
// times), then `(.)\*(\d+)` (one character repeated N times). Whatever is
// left must be layer letters and '|'. So "(t|)*3" is "t|t|t|", "Et*3|(tt|)*2L"
// is "Ettt|tt|ttL", and "((t)*2)*3" is not a layout (groups do not nest).
//
// Errors are *LayoutError values that point at the offending character of s.
// Expanded layouts longer than 65536 characters are refused (the reference
// has no bound; gotron's would be the machine's memory).
func ParsePipelineLayout(s string, pipelineModelParallelSize int) (*PipelineLayout, error) {
	if pipelineModelParallelSize < 1 {
		return nil, &LayoutError{Layout: s, Pos: -1, Stage: -1, field: "pipeline_model_parallel_size",
			Msg: fmt.Sprintf("pipeline_model_parallel_size is %d: it must be ≥ 1", pipelineModelParallelSize)}
	}
	stages, pos, err := expandLayout(s)
	if err != nil {
		return nil, err
	}
	l := &PipelineLayout{src: s, pp: pipelineModelParallelSize, stages: stages, pos: pos}
	if e := l.divisibilityProblem(); e != nil {
		return nil, e
	}
	l.vpp = len(stages) / l.pp
	return l, nil
}

// divisibilityProblem reports a stage count that is not a multiple of pp.
func (l *PipelineLayout) divisibilityProblem() *LayoutError {
	n, p := len(l.stages), l.pp
	if n%p == 0 {
		return nil
	}
	return &LayoutError{Layout: l.src, Pos: -1, Stage: -1, field: "pipeline_model_parallel_size", Msg: fmt.Sprintf(
		"layout has %d stages, not divisible by pipeline_model_parallel_size %d: use a multiple of %d stages (%s)",
		n, p, p, nearestMultiples(n, p, p))}
}

// nearestMultiples returns the multiples of m nearest to n that are ≥ floor,
// as "4 or 8" (or just "8" when the lower one is below floor).
func nearestMultiples(n, m, floor int) string {
	lo := n / m * m
	hi := lo + m
	if lo < floor {
		return fmt.Sprint(max(hi, floor/m*m))
	}
	return fmt.Sprintf("%d or %d", lo, hi)
}

// PP returns the pipeline size the layout was parsed for.
func (l *PipelineLayout) PP() int { return l.pp }

// VPP returns the number of virtual stages per pipeline rank, S/pp (1 when
// the layout has exactly pp stages).
func (l *PipelineLayout) VPP() int { return l.vpp }

// NumStages returns S = pp·vpp.
func (l *PipelineLayout) NumStages() int { return len(l.stages) }

// Stage returns the layers of model chunk (pipeline rank pp, virtual stage
// vp), stage vp·PP()+pp of the string, in order. The slice must not be
// modified. It panics if pp or vp is out of range (a programmer error).
func (l *PipelineLayout) Stage(pp, vp int) []LayerType {
	if pp < 0 || pp >= l.pp || vp < 0 || vp >= l.vpp {
		panic(fmt.Sprintf("config: PipelineLayout.Stage(%d, %d) outside pp %d × vpp %d", pp, vp, l.pp, l.vpp))
	}
	return l.stages[vp*l.pp+pp]
}

// Stages returns a copy of the expanded 1D stage list (stage v·pp + p).
func (l *PipelineLayout) Stages() [][]LayerType {
	out := make([][]LayerType, len(l.stages))
	for i, s := range l.stages {
		out[i] = append([]LayerType{}, s...)
	}
	return out
}

// Count returns how many layers of type t the whole layout holds.
func (l *PipelineLayout) Count(t LayerType) int {
	n := 0
	for _, s := range l.stages {
		n += countType(s, t)
	}
	return n
}

// NumLayersToBuild returns how many layers of type t model chunk (vp, pp)
// holds: the count of t in stage vp·PP()+pp (the reference's
// get_num_layers_to_build).
func (l *PipelineLayout) NumLayersToBuild(t LayerType, vp, pp int) int {
	return countType(l.Stage(pp, vp), t)
}

// LayerOffset returns the index, among all layers of type t, of the first
// one model chunk (vp, pp) holds: the count of t in every stage before it in
// layer order, i.e. in the stages (v' < vp, any p') and (v' = vp, p' < pp)
// (the reference's get_layer_offset). The chunk's layers of type t are
// LayerOffset … LayerOffset+NumLayersToBuild−1.
func (l *PipelineLayout) LayerOffset(t LayerType, vp, pp int) int {
	l.Stage(pp, vp) // range check
	n := 0
	for s := 0; s < vp*l.pp+pp; s++ {
		n += countType(l.stages[s], t)
	}
	return n
}

// MTPStandalone reports whether some pipeline rank other than the last holds
// MTP layers in its last virtual stage (the value the reference's
// validate_layer_layout returns, TransformerConfig.mtp_standalone).
func (l *PipelineLayout) MTPStandalone() bool {
	for p := 0; p < l.pp-1; p++ {
		if countType(l.Stage(p, l.vpp-1), LayerMTP) > 0 {
			return true
		}
	}
	return false
}

// String returns the expanded layout: every stage's letters, stages joined by
// '|'. It parses back to the same stages.
func (l *PipelineLayout) String() string { return stagesString(l.stages) }

// Source returns the layout string as given to ParsePipelineLayout.
func (l *PipelineLayout) Source() string { return l.src }

// stagesString joins stages' letters with '|'.
func stagesString(stages [][]LayerType) string {
	var b strings.Builder
	for i, s := range stages {
		if i > 0 {
			b.WriteByte('|')
		}
		for _, t := range s {
			b.WriteByte(byte(t))
		}
	}
	return b.String()
}

func countType(s []LayerType, t LayerType) int {
	n := 0
	for _, x := range s {
		if x == t {
			n++
		}
	}
	return n
}
