package config

import (
	"errors"
	"testing"
)

// FuzzParsePipelineLayout checks that parsing never panics, that a failure
// is a *LayoutError pointing inside the string, and that a successful
// parse's String() parses back to the same stages, whose offsets are the
// cumulative counts in layer order.
func FuzzParsePipelineLayout(f *testing.F) {
	for _, s := range []string{
		"Et*3|(tt|)*29,m|L", "E||t|L", "E|t*3|(t|)*5mL", "E|t*3|(t|)*4tm|L", "E|t*3|(t|)*3tt|m|L",
		"(|tt)*2,tL", "xy(ab|cd|ef)*2,pq", "((t)*2)*3", "t*2*3", "(t*2|)*3", "|*3", "()*3", "", "Et*3|tt|x|L",
		"E(t|)*99999", "t*0", "E\n*2", "é*2|L",
	} {
		for _, pp := range []int{1, 2, 4} {
			f.Add(s, pp)
		}
	}
	f.Fuzz(func(t *testing.T, s string, pp int) {
		pp = pp%8 + 1
		if pp < 1 {
			pp += 8
		}
		l, err := ParsePipelineLayout(s, pp)
		if err != nil {
			var le *LayoutError
			if !errors.As(err, &le) {
				t.Fatalf("%q: %T is not a *LayoutError", s, err)
			}
			if le.Pos >= len([]rune(s)) {
				t.Fatalf("%q: Pos %d beyond the string", s, le.Pos)
			}
			_ = err.Error()
			return
		}
		again, err := ParsePipelineLayout(l.String(), pp)
		if err != nil {
			t.Fatalf("%q expands to %q, which does not parse: %v", s, l.String(), err)
		}
		if again.String() != l.String() || again.NumStages() != l.NumStages() || again.VPP() != l.VPP() {
			t.Fatalf("%q: %q re-parses to %q", s, l.String(), again.String())
		}
		if l.NumStages() > 256 {
			return // the offset check below is quadratic in the stages
		}
		off := map[LayerType]int{}
		for v := 0; v < l.VPP(); v++ {
			for p := 0; p < pp; p++ {
				for _, ty := range []LayerType{LayerEmbedding, LayerDecoder, LayerMTP, LayerLoss} {
					if o := l.LayerOffset(ty, v, p); o != off[ty] {
						t.Fatalf("%q: offset of %v at (pp %d, vp %d) is %d, want %d", s, ty, p, v, o, off[ty])
					}
					off[ty] += l.NumLayersToBuild(ty, v, p)
				}
			}
		}
		_ = l.Validate(l.Count(LayerDecoder), l.Count(LayerMTP))
		_ = l.MTPStandalone()
	})
}
