package gptdata

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// The .npy format (numpy.lib.format): the magic "\x93NUMPY", a major and a
// minor version byte, the header length (uint16 little-endian in version
// 1.0, uint32 in 2.0 and 3.0), the header — a Python dict literal
// {'descr': '<i4', 'fortran_order': False, 'shape': (N,), } padded with
// spaces and ended by '\n' so that the data starts at a multiple of 64 — and
// the array's bytes in C order.

const npyMagic = "\x93NUMPY"

// maxElements bounds the elements of an array read (2^50).
const maxElements = 1 << 50

// npyItemSize holds the dtypes of the index arrays and their sizes.
var npyItemSize = map[string]int{"<i2": 2, "<i4": 4, "<u4": 4, "<i8": 8}

// array is an integer index array as numpy holds it: its dtype, shape and
// the elements in C order in one of the slices.
type array struct {
	descr string
	shape []int
	i16   []int16
	i32   []int32
	u32   []uint32
	i64   []int64
}

// at returns element i of the flattened array.
func (a *array) at(i int) int64 {
	switch a.descr {
	case "<i2":
		return int64(a.i16[i])
	case "<i4":
		return int64(a.i32[i])
	case "<u4":
		return int64(a.u32[i])
	}
	return a.i64[i]
}

// size returns the number of elements.
func (a *array) size() int {
	n := 1
	for _, d := range a.shape {
		n *= d
	}
	return n
}

// npyHeader returns the bytes before the data of an array of dtype descr and
// shape that numpy.save writes (format 1.0): the dict with keys in sorted
// order, 21 − len(repr(shape[0])) spaces of room to grow the first axis, the
// padding to 64 bytes and '\n'.
func npyHeader(descr string, shape []int) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := "(" + strings.Join(dims, ", ") + ")"
	if len(shape) == 1 {
		tuple = "(" + dims[0] + ",)"
	}
	h := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + tuple + ", }"
	if len(shape) > 0 {
		h += strings.Repeat(" ", max(0, 21-len(dims[0])))
	}
	hlen := len(h) + 1
	pad := 64 - (len(npyMagic)+2+2+hlen)%64
	out := make([]byte, 0, len(npyMagic)+4+hlen+pad)
	out = append(out, npyMagic...)
	out = append(out, 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(hlen+pad))
	out = append(out, h...)
	for range pad {
		out = append(out, ' ')
	}
	return append(out, '\n')
}

// encodeNpy returns the .npy file of a.
func encodeNpy(a *array) []byte {
	n := a.size()
	out := npyHeader(a.descr, a.shape)
	le := binary.LittleEndian
	for i := 0; i < n; i++ {
		switch a.descr {
		case "<i2":
			out = le.AppendUint16(out, uint16(a.i16[i]))
		case "<i4":
			out = le.AppendUint32(out, uint32(a.i32[i]))
		case "<u4":
			out = le.AppendUint32(out, a.u32[i])
		default:
			out = le.AppendUint64(out, uint64(a.i64[i]))
		}
	}
	return out
}

// decodeNpy parses a .npy file of one of the index dtypes (format 1.0, 2.0
// or 3.0, C order). The data must be exactly the shape's bytes.
func decodeNpy(b []byte) (*array, error) {
	if len(b) < 10 || string(b[:6]) != npyMagic {
		return nil, fmt.Errorf("not a .npy file (no \\x93NUMPY magic)")
	}
	major, minor := b[6], b[7]
	var hlen, start int
	switch {
	case major == 1 && minor == 0:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:])), 10
	case (major == 2 || major == 3) && minor == 0 && len(b) >= 12:
		h := binary.LittleEndian.Uint32(b[8:])
		if uint64(h) > uint64(len(b)) {
			return nil, fmt.Errorf("header of %d bytes in a file of %d", h, len(b))
		}
		hlen, start = int(h), 12
	default:
		return nil, fmt.Errorf("format version %d.%d, want 1.0, 2.0 or 3.0", major, minor)
	}
	if start+hlen > len(b) {
		return nil, fmt.Errorf("header of %d bytes at offset %d in a file of %d", hlen, start, len(b))
	}
	descr, fortran, shape, err := parseNpyHeader(string(b[start : start+hlen]))
	if err != nil {
		return nil, fmt.Errorf("header at offset %d: %v", start, err)
	}
	item, ok := npyItemSize[descr]
	if !ok {
		return nil, fmt.Errorf("dtype %q, want one of <i2, <i4, <u4, <i8", descr)
	}
	if fortran && len(shape) > 1 {
		return nil, fmt.Errorf("Fortran order, want C order")
	}
	n := 1
	for _, d := range shape {
		if d != 0 && n > maxElements/d {
			return nil, fmt.Errorf("shape %v is too large", shape)
		}
		n *= d
	}
	data := b[start+hlen:]
	if len(data) != n*item {
		return nil, fmt.Errorf("%d data bytes at offset %d, shape %v of %s needs %d", len(data), start+hlen, shape, descr, n*item)
	}
	a := &array{descr: descr, shape: shape}
	le := binary.LittleEndian
	switch descr {
	case "<i2":
		a.i16 = make([]int16, n)
		for i := range a.i16 {
			a.i16[i] = int16(le.Uint16(data[2*i:]))
		}
	case "<i4":
		a.i32 = make([]int32, n)
		for i := range a.i32 {
			a.i32[i] = int32(le.Uint32(data[4*i:]))
		}
	case "<u4":
		a.u32 = make([]uint32, n)
		for i := range a.u32 {
			a.u32[i] = le.Uint32(data[4*i:])
		}
	default:
		a.i64 = make([]int64, n)
		for i := range a.i64 {
			a.i64[i] = int64(le.Uint64(data[8*i:]))
		}
	}
	return a, nil
}

// parseNpyHeader parses the header dict: exactly the keys 'descr' (a
// string), 'fortran_order' (True or False) and 'shape' (a tuple of
// non-negative integers), in any order, a trailing comma allowed, then
// spaces and '\n'.
func parseNpyHeader(h string) (descr string, fortran bool, shape []int, err error) {
	p := &pyLit{s: h}
	if !p.eat("{") {
		return "", false, nil, fmt.Errorf("want a dict, got %.40q", h)
	}
	seen := map[string]bool{}
	for !p.eat("}") {
		key, err := p.str()
		if err != nil {
			return "", false, nil, err
		}
		if seen[key] {
			return "", false, nil, fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		if !p.eat(":") {
			return "", false, nil, fmt.Errorf("no ':' after %q", key)
		}
		switch key {
		case "descr":
			descr, err = p.str()
		case "fortran_order":
			switch {
			case p.eat("True"):
				fortran = true
			case p.eat("False"):
			default:
				err = fmt.Errorf("fortran_order is not True or False")
			}
		case "shape":
			shape, err = p.tuple()
		default:
			err = fmt.Errorf("unexpected key %q", key)
		}
		if err != nil {
			return "", false, nil, err
		}
		if !p.eat(",") && !p.peek("}") {
			return "", false, nil, fmt.Errorf("want ',' or '}' at header byte %d", p.i)
		}
	}
	if len(seen) != 3 {
		return "", false, nil, fmt.Errorf("keys %v, want descr, fortran_order and shape", seen)
	}
	if rest := h[p.i:]; !strings.HasSuffix(rest, "\n") || strings.Trim(rest[:len(rest)-1], " ") != "" {
		return "", false, nil, fmt.Errorf("%q after the dict, want spaces and a newline", rest)
	}
	return descr, fortran, shape, nil
}

// pyLit scans the Python literals of a .npy header.
type pyLit struct {
	s string
	i int
}

func (p *pyLit) skip() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *pyLit) peek(tok string) bool {
	p.skip()
	return strings.HasPrefix(p.s[p.i:], tok)
}

func (p *pyLit) eat(tok string) bool {
	if p.peek(tok) {
		p.i += len(tok)
		return true
	}
	return false
}

// str scans a quoted string without escapes.
func (p *pyLit) str() (string, error) {
	p.skip()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("want a quoted string at header byte %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at header byte %d", p.i)
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsRune(v, '\\') {
		return "", fmt.Errorf("escape in string %q", v)
	}
	p.i += end + 2
	return v, nil
}

// tuple scans (), (n,) or (n, m, …) of non-negative integers.
func (p *pyLit) tuple() ([]int, error) {
	if !p.eat("(") {
		return nil, fmt.Errorf("shape is not a tuple")
	}
	dims := []int{}
	for !p.eat(")") {
		p.skip()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		d, err := strconv.Atoi(p.s[p.i:j])
		if err != nil || d > maxElements {
			return nil, fmt.Errorf("shape dimension %.20q is not an integer in [0, 2^50]", p.s[p.i:])
		}
		p.i = j
		dims = append(dims, d)
		if !p.eat(",") && !p.peek(")") {
			return nil, fmt.Errorf("want ',' or ')' in the shape at header byte %d", p.i)
		}
	}
	if len(dims) == 1 && !strings.HasSuffix(strings.TrimRight(p.s[:p.i-1], " "), ",") {
		return nil, fmt.Errorf("shape (%d) is not a tuple (want (%d,))", dims[0], dims[0])
	}
	return dims, nil
}
