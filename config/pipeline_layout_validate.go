package config

import (
	"errors"
	"fmt"
	"strings"
)

// Validate checks the layers of the layout against the model (the
// reference's validate_layer_layout, docs/SEMANTICS.md § Pipeline layout
// strings):
//
//   - the first layer is the embedding E and the last the loss L, each
//     exactly once (empty stages before E or after L are allowed);
//   - the number of decoder layers t is numLayers;
//   - the number of MTP layers m is mtpNumLayers (0 means none, the
//     reference's None);
//   - no decoder layer comes after the first MTP layer;
//   - MTP layers sit only in the last virtual stage of a rank, and all of
//     them in one stage. (The reference's third MTP rule, none on pipeline
//     rank 0 outside its last virtual stage, is implied by the first.)
//
// It returns nil or the errors.Join of one *LayoutError per broken rule.
func (l *PipelineLayout) Validate(numLayers, mtpNumLayers int) error {
	ps := l.layerProblems(numLayers, mtpNumLayers)
	ps = append(ps, l.placementProblems(mtpNumLayers)...)
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// flatLayer is one layer of the layout in layer order, with where it is.
type flatLayer struct {
	t     LayerType
	pos   int // rune index in the source
	stage int
}

func (l *PipelineLayout) flat() []flatLayer {
	var out []flatLayer
	for s, st := range l.stages {
		for i, t := range st {
			out = append(out, flatLayer{t, l.pos[s][i], s})
		}
	}
	return out
}

// at describes where a layer is, as "position 3 (stage 0)".
func (f flatLayer) at() string { return fmt.Sprintf("position %d (stage %d)", f.pos+1, f.stage) }

func (l *PipelineLayout) problem(pos, stage int, format string, args ...any) *LayoutError {
	return &LayoutError{Layout: l.src, Pos: pos, Stage: stage, Msg: fmt.Sprintf(format, args...)}
}

// layerProblems checks the rules that need only the 1D layer order: E and L,
// the decoder and MTP counts, and decoder layers after MTP layers.
func (l *PipelineLayout) layerProblems(numLayers, mtpNumLayers int) []*LayoutError {
	var ps []*LayoutError
	fl := l.flat()
	for _, end := range []struct {
		t     LayerType
		first bool
	}{{LayerEmbedding, true}, {LayerLoss, false}} {
		var where []flatLayer
		for _, f := range fl {
			if f.t == end.t {
				where = append(where, f)
			}
		}
		place, side, edge := "last", "end", len(fl)-1
		if end.first {
			place, side, edge = "first", "start", 0
		}
		switch {
		case len(where) == 0:
			ps = append(ps, l.problem(-1, -1, "layout has no %s layer %s: it must be the %s layer of the layout, exactly once (e.g. \"Et*4|t*4L\")",
				end.t, end.t.Letter(), place))
			continue
		case fl[edge].t != end.t:
			f := fl[edge]
			ps = append(ps, l.problem(f.pos, f.stage, "the %s layer must be the %s %s, but it is %s at %s: move %s to the %s of the %s stage",
				place, end.t, end.t.Letter(), f.t.Letter(), f.at(), end.t.Letter(), side, place))
		default:
			// The embedding lives on the first model chunk of the first
			// pipeline rank and the loss on the last chunk of the last
			// rank (pre_process and post_process): an empty stage before
			// E or after L would move them.
			stage, want := where[0].stage, 0
			if !end.first {
				stage, want = where[len(where)-1].stage, len(l.stages)-1
			}
			if stage != want {
				f := where[0]
				if !end.first {
					f = where[len(where)-1]
				}
				ps = append(ps, l.problem(f.pos, f.stage, "the %s %s is in stage %d, but it must be in the %s stage (%d: pipeline rank %d, virtual stage %d): remove the empty stages %s it",
					end.t, end.t.Letter(), stage, place, want, want%l.pp, want/l.pp, map[bool]string{true: "before", false: "after"}[end.first]))
			}
		}
		if len(where) > 1 {
			at := make([]string, len(where))
			for i, f := range where {
				at[i] = fmt.Sprint(f.pos + 1)
			}
			extra := where[1]
			if !end.first {
				extra = where[0]
			}
			ps = append(ps, l.problem(extra.pos, extra.stage, "the %s %s appears %d times (positions %s): it must appear exactly once, as the %s layer",
				end.t, end.t.Letter(), len(where), strings.Join(at, ", "), place))
		}
	}

	if n := l.Count(LayerDecoder); n != numLayers {
		fix := fmt.Sprintf("add %d t", numLayers-n)
		if n > numLayers {
			fix = fmt.Sprintf("remove %d t", n-numLayers)
		}
		e := l.problem(-1, -1, "layout has %d decoder layers (t) but num_layers is %d: %s or set --num-layers %d",
			n, numLayers, fix, n)
		e.field = "num_layers"
		ps = append(ps, e)
	}
	if n := l.Count(LayerMTP); n != mtpNumLayers {
		want, fix := fmt.Sprint(mtpNumLayers), fmt.Sprintf("write %d m", mtpNumLayers)
		if mtpNumLayers == 0 {
			want, fix = "unset (0)", "remove the m"
		}
		e := l.problem(-1, -1, "layout has %d MTP layers (m) but mtp_num_layers is %s: %s or set --mtp-num-layers %d",
			n, want, fix, n)
		e.field = "mtp_num_layers"
		ps = append(ps, e)
	}
	firstMTP := -1
	for i, f := range fl {
		if f.t == LayerMTP && firstMTP < 0 {
			firstMTP = i
		}
		if f.t == LayerDecoder && firstMTP >= 0 {
			m := fl[firstMTP]
			ps = append(ps, l.problem(f.pos, f.stage, "decoder layer t at %s comes after the first MTP layer m at %s: every decoder layer must come before the MTP layers",
				f.at(), m.at()))
			break
		}
	}
	return ps
}

// placementProblems checks the MTP rules that need the 2D placement.
func (l *PipelineLayout) placementProblems(mtpNumLayers int) []*LayoutError {
	var ps []*LayoutError
	for s, st := range l.stages {
		p, v := s%l.pp, s/l.pp
		i := indexType(st, LayerMTP)
		if i < 0 {
			continue
		}
		if v < l.vpp-1 {
			ps = append(ps, l.problem(l.pos[s][i], s, "MTP layer m at position %d is in stage %d, virtual stage %d of pipeline rank %d: MTP layers must be in the last virtual stage (%d) of a rank, stages %d…%d",
				l.pos[s][i]+1, s, v, p, l.vpp-1, (l.vpp-1)*l.pp, l.vpp*l.pp-1))
			continue
		}
		if n := countType(st, LayerMTP); mtpNumLayers > 0 && n != mtpNumLayers {
			e := l.problem(l.pos[s][i], s, "stage %d (pipeline rank %d) holds %d of the mtp_num_layers = %d MTP layers: all MTP layers must be in one stage",
				s, p, n, mtpNumLayers)
			e.field = "mtp_num_layers"
			ps = append(ps, e)
		}
	}
	return ps
}

func indexType(s []LayerType, t LayerType) int {
	for i, x := range s {
		if x == t {
			return i
		}
	}
	return -1
}
