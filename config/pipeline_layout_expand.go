package config

import (
	"fmt"
	"strconv"
	"strings"
)

// maxExpandedLayout bounds the expanded length of a layout string (layer
// letters and separators). Real layouts have a few thousand at most.
const maxExpandedLayout = 1 << 16

// LayoutError is a problem with a pipeline_model_parallel_layout string. When
// the problem is one character, Pos is its index (in runes, from 0) in Layout
// and Error adds a caret line under it; Stage is the stage (v·pp + p, from 0)
// the problem is in, or −1.
type LayoutError struct {
	Layout string // the layout string as given
	Pos    int    // rune index into Layout of the offending character, or −1
	Stage  int    // index of the stage concerned, or −1
	Msg    string // what is wrong and how to fix it

	field string // the setting other than the layout the problem involves, if any
}

// Error returns `pipeline_model_parallel_layout "<layout>": <msg>`, followed,
// when Pos ≥ 0 and the layout prints as itself, by the layout and a caret
// under the offending character on two indented lines.
func (e *LayoutError) Error() string {
	s := fmt.Sprintf("pipeline_model_parallel_layout %q: %s", e.Layout, e.Msg)
	if e.Pos >= 0 && strconv.Quote(e.Layout) == `"`+e.Layout+`"` {
		s += "\n    " + e.Layout + "\n    " + strings.Repeat(" ", e.Pos) + "^"
	}
	return s
}

// sym is one character of a layout being expanded, with the index of the
// source character it came from.
type sym struct {
	r   rune
	pos int
}

// expandLayout removes the commas, applies the two substitutions of
// ParsePipelineLayout, splits on '|' and maps the letters. pos[s][i] is the
// source index of stages[s][i].
func expandLayout(src string) (stages [][]LayerType, pos [][]int, err error) {
	var in []sym
	for i, r := range []rune(src) {
		if r != ',' {
			in = append(in, sym{r, i})
		}
	}
	if in, err = expandGroups(src, in); err != nil {
		return nil, nil, err
	}
	if in, err = expandChars(src, in); err != nil {
		return nil, nil, err
	}
	stages, pos = [][]LayerType{{}}, [][]int{{}}
	for _, c := range in {
		if c.r == '|' {
			stages, pos = append(stages, []LayerType{}), append(pos, []int{})
			continue
		}
		s := len(stages) - 1
		if !validLayerType(c.r) {
			return nil, nil, &LayoutError{Layout: src, Pos: c.pos, Stage: s, Msg: fmt.Sprintf(
				"invalid layer character %q at position %d (stage %d): use E (embedding), t (decoder), m (MTP), L (loss), | between stages%s",
				c.r, c.pos+1, s, charHint(c.r))}
		}
		stages[s] = append(stages[s], LayerType(c.r))
		pos[s] = append(pos[s], c.pos)
	}
	return stages, pos, nil
}

// charHint explains the likely intent behind an invalid layout character.
func charHint(r rune) string {
	switch r {
	case '(', ')':
		return "; a group is (…)*N with a count, and groups do not nest"
	case '*':
		return "; *N repeats the one character or (…) group just before it, and N is a number"
	case 'e', 'T', 'M', 'l':
		return fmt.Sprintf("; the letters are case-sensitive: did you mean %q?", swapCase(r))
	case ' ', '\t', '\n':
		return "; spaces are not allowed"
	}
	if r >= '0' && r <= '9' {
		return "; a count must follow * (as in t*3 or (t|)*3)"
	}
	return ""
}

func swapCase(r rune) rune {
	if r >= 'a' && r <= 'z' {
		return r - 'a' + 'A'
	}
	return r - 'A' + 'a'
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// readCount reads the decimal number at in[i:] (in[i] is a digit) and returns
// it, saturated at maxExpandedLayout+1, and the index after its last digit.
func readCount(in []sym, i int) (n, end int) {
	for end = i; end < len(in) && isDigit(in[end].r); end++ {
		if n <= maxExpandedLayout {
			n = n*10 + int(in[end].r-'0')
		}
	}
	return min(n, maxExpandedLayout+1), end
}

// repeat appends body n times to out, refusing to grow past
// maxExpandedLayout; star is the '*' of the count, for the error.
func repeat(src string, out, body []sym, n int, star sym) ([]sym, error) {
	if len(out)+n*len(body) > maxExpandedLayout {
		return nil, &LayoutError{Layout: src, Pos: star.pos, Stage: -1, Msg: fmt.Sprintf(
			"the repetition at position %d expands the layout beyond %d characters: no model needs that many stages or layers",
			star.pos+1, maxExpandedLayout)}
	}
	for k := 0; k < n; k++ {
		out = append(out, body...)
	}
	return out, nil
}

// expandGroups is the first substitution, `\(([^)]+)\)\*(\d+)` → body×N,
// one left-to-right pass. A match starts at a '(' whose body runs to the
// next ')' (at least one character, '(' and '|' included) and is followed
// by '*' and digits.
func expandGroups(src string, in []sym) ([]sym, error) {
	out := make([]sym, 0, len(in))
	for i := 0; i < len(in); {
		if in[i].r == '(' {
			j := i + 1
			for j < len(in) && in[j].r != ')' {
				j++
			}
			if j > i+1 && j+2 < len(in) && in[j+1].r == '*' && isDigit(in[j+2].r) {
				n, end := readCount(in, j+2)
				var err error
				if out, err = repeat(src, out, in[i+1:j], n, in[j+1]); err != nil {
					return nil, err
				}
				i = end
				continue
			}
		}
		out = append(out, in[i])
		i++
	}
	return out, nil
}

// expandChars is the second substitution, `(.)\*(\d+)` → c×N, one
// left-to-right pass; '.' is any character but a newline.
func expandChars(src string, in []sym) ([]sym, error) {
	out := make([]sym, 0, len(in))
	for i := 0; i < len(in); {
		if in[i].r != '\n' && i+2 < len(in) && in[i+1].r == '*' && isDigit(in[i+2].r) {
			n, end := readCount(in, i+2)
			var err error
			if out, err = repeat(src, out, in[i:i+1], n, in[i+1]); err != nil {
				return nil, err
			}
			i = end
			continue
		}
		out = append(out, in[i])
		i++
	}
	return out, nil
}
