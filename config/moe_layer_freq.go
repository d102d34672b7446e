package config

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxMoELayerPattern bounds the length of a --moe-layer-freq pattern (and
// every list built on the way to it), so that "[1]*999999999" is an error
// rather than a gigabyte of layers.
const MaxMoELayerPattern = 1 << 16

// maxMoEFreqInt bounds the integers of a pattern expression.
const maxMoEFreqInt = 1 << 31

// ParseMoELayerFreq reads a moe_layer_freq as Megatron's --moe-layer-freq
// takes it. A value without '[' is one integer N, every N-th layer MoE
// (returned as []int{N}: MoE.MoELayerFreq's frequency form; N is checked
// by the config's validation). A value with '[' is a Python list
// expression over integers, lists, '+', '*' and parentheses, as the
// reference evaluates it: "[1,0,1,0]", "([1]*3+[0]*1)*2" (a list repeated
// by '*' an integer, lists joined by '+'); spaces are ignored. It
// returns the evaluated list and pattern true. The values are not checked
// here (the config wants one 0 or 1 per layer), but an expression that
// is not a non-empty list of integers, or longer than MaxMoELayerPattern,
// is an error.
//
// A one-value pattern ("[1]") is returned as one value too, which the
// config reads as a frequency; pattern tells the caller it was a list.
func ParseMoELayerFreq(s string) (freq []int, pattern bool, err error) {
	if !strings.Contains(s, "[") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, false, fmt.Errorf("moe_layer_freq %q is neither an integer N (every N-th layer MoE) nor a list pattern (with '[')", s)
		}
		return []int{n}, false, nil
	}
	p := &freqParser{s: s}
	v, err := p.parse()
	if err != nil {
		return nil, true, fmt.Errorf("moe_layer_freq pattern %q: %v", s, err)
	}
	return v, true, nil
}

// FormatMoELayerFreq is ParseMoELayerFreq's inverse: "N" for a frequency
// (and "1", the default, for none), "[a,b,…]" for a pattern.
func FormatMoELayerFreq(f []int) string {
	switch len(f) {
	case 0:
		return "1"
	case 1:
		return strconv.Itoa(f[0])
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range f {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v))
	}
	b.WriteByte(']')
	return b.String()
}

// freqValue is a value of a pattern expression: an integer, or a list of
// integers.
type freqValue struct {
	list   []int
	isList bool
	n      int
}

// freqParser evaluates a pattern expression by recursive descent, with
// Python's precedence ('*' before '+', left to right):
//
//	expr := term ('+' term)*
//	term := atom ('*' atom)*
//	atom := INT | '[' [expr (',' expr)* [',']] ']' | '(' expr ')'
//
// A list's elements are integers (expressions giving one). An integer
// times a list (either side) repeats it; lists add to their
// concatenation, integers to their sum.
type freqParser struct {
	s     string
	i     int
	depth int
}

// maxFreqDepth bounds the nesting of brackets and parentheses.
const maxFreqDepth = 64

func (p *freqParser) parse() ([]int, error) {
	v, err := p.expr()
	if err != nil {
		return nil, err
	}
	p.skip()
	if p.i < len(p.s) {
		return nil, p.errorf("unexpected %q", p.s[p.i])
	}
	switch {
	case !v.isList:
		return nil, fmt.Errorf("it gives the integer %d, not a list: write N without brackets for a frequency, or a list of 0s and 1s", v.n)
	case len(v.list) == 0:
		return nil, fmt.Errorf("it gives an empty list: a pattern has one 0 (dense) or 1 (MoE) per layer")
	}
	return v.list, nil
}

func (p *freqParser) errorf(format string, a ...any) error {
	return fmt.Errorf("at offset %d: %s", p.i, fmt.Sprintf(format, a...))
}

func (p *freqParser) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// peek returns the next character after whitespace, 0 at the end.
func (p *freqParser) peek() byte {
	p.skip()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *freqParser) expr() (freqValue, error) {
	v, err := p.term()
	if err != nil {
		return v, err
	}
	for p.peek() == '+' {
		p.i++
		at := p.i
		w, err := p.term()
		if err != nil {
			return v, err
		}
		switch {
		case v.isList && w.isList:
			if len(v.list)+len(w.list) > MaxMoELayerPattern {
				return v, p.tooLong()
			}
			v.list = append(v.list, w.list...) // every list value is its own: no other holds v.list
		case !v.isList && !w.isList:
			if v.n+w.n > maxMoEFreqInt {
				return v, p.errorf("the integer %d+%d is beyond any layer count", v.n, w.n)
			}
			v.n += w.n
		default:
			p.i = at
			return v, p.errorf("'+' joins a list and an integer: lists join lists ([1]+[0]), integers add to integers")
		}
	}
	return v, nil
}

func (p *freqParser) term() (freqValue, error) {
	v, err := p.atom()
	if err != nil {
		return v, err
	}
	for p.peek() == '*' {
		p.i++
		if p.peek() == '*' {
			return v, p.errorf("'**' (a power) is not a pattern operator: repeat a list with one '*'")
		}
		at := p.i
		w, err := p.atom()
		if err != nil {
			return v, err
		}
		switch {
		case v.isList && w.isList:
			p.i = at
			return v, p.errorf("'*' between two lists: repeat a list by an integer ([1]*3)")
		case !v.isList && !w.isList:
			if v.n != 0 && w.n > maxMoEFreqInt/v.n {
				return v, p.errorf("the integer %d*%d is beyond any layer count", v.n, w.n)
			}
			v.n *= w.n
		default:
			l, n := v.list, w.n
			if w.isList {
				l, n = w.list, v.n
			}
			if len(l) > 0 && n > MaxMoELayerPattern/len(l) {
				return v, p.tooLong()
			}
			r := []int{}
			if len(l) > 0 {
				r = make([]int, 0, len(l)*n)
				for range n {
					r = append(r, l...)
				}
			}
			v = freqValue{list: r, isList: true}
		}
	}
	return v, nil
}

func (p *freqParser) atom() (freqValue, error) {
	c := p.peek()
	switch {
	case c >= '0' && c <= '9':
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		n, err := strconv.Atoi(p.s[start:p.i])
		if err != nil || n > maxMoEFreqInt {
			p.i = start
			return freqValue{}, p.errorf("the integer %s is beyond any layer count", p.s[start:min(len(p.s), start+20)])
		}
		return freqValue{n: n}, nil
	case c == '(':
		if err := p.enter(); err != nil {
			return freqValue{}, err
		}
		v, err := p.expr()
		if err != nil {
			return v, err
		}
		switch p.peek() {
		case ')':
			p.i++
		case ',':
			return v, p.errorf("a tuple: parentheses group one expression; a pattern is a list [a,b,…]")
		default:
			return v, p.closing('(', "')'")
		}
		p.depth--
		return v, nil
	case c == '[':
		if err := p.enter(); err != nil {
			return freqValue{}, err
		}
		l := []int{}
		for p.peek() != ']' {
			at := p.i
			e, err := p.expr()
			if err != nil {
				return e, err
			}
			if e.isList {
				p.i = at
				return e, p.errorf("a list inside a list: a pattern's elements are integers (join lists with '+')")
			}
			if len(l) == MaxMoELayerPattern {
				return e, p.tooLong()
			}
			l = append(l, e.n)
			if p.peek() != ',' {
				break
			}
			p.i++
		}
		if p.peek() != ']' {
			return freqValue{}, p.closing('[', "',' or ']'")
		}
		p.i++
		p.depth--
		return freqValue{list: l, isList: true}, nil
	case c == 0:
		return freqValue{}, p.errorf("it ends where an integer, '[' or '(' should follow")
	}
	return freqValue{}, p.errorf("unexpected %q: a pattern has integers, lists [a,b], '+', '*' and parentheses", c)
}

// enter consumes an opening bracket, bounding the nesting.
func (p *freqParser) enter() error {
	if p.depth == maxFreqDepth {
		return p.errorf("brackets nested deeper than %d", maxFreqDepth)
	}
	p.depth++
	p.i++
	return nil
}

// closing is the error of a bracket open not followed by what may follow
// (want).
func (p *freqParser) closing(open byte, want string) error {
	if c := p.peek(); c != 0 {
		return p.errorf("unexpected %q where %s should follow", c, want)
	}
	return p.errorf("%q is not closed", open)
}

func (p *freqParser) tooLong() error {
	return p.errorf("the list grows beyond %d layers", MaxMoELayerPattern)
}
