package gptdata

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyDict is an ordered JSON object, a Python OrderedDict. Values are
// string, int, int64, float64, pyInt0, nil (null), []any, pyDict.
type pyDict []pyItem

type pyItem struct {
	key string
	val any
}

// pyInt0 is the integer 0 that starts the reference's split matrix (its
// running sums start from the int 0, so the first bookend prints "0", not
// "0.0").
type pyInt0 struct{}

// pyDumps returns json.dumps(v, indent=4) as Python writes it: ", " between
// items on new lines indented by four spaces per level, ": " after keys,
// ASCII only, floats as Python's repr.
func pyDumps(v any) string {
	var b strings.Builder
	pyEncode(&b, v, 0)
	return b.String()
}

func pyEncode(b *strings.Builder, v any, level int) {
	nl := "\n" + strings.Repeat("    ", level+1)
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case string:
		b.WriteString(pyString(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case pyInt0:
		b.WriteString("0")
	case float64:
		b.WriteString(pyFloat(x))
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[")
		for i, e := range x {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(nl)
			pyEncode(b, e, level+1)
		}
		b.WriteString("\n" + strings.Repeat("    ", level) + "]")
	case pyDict:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{")
		for i, e := range x {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(nl + pyString(e.key) + ": ")
			pyEncode(b, e.val, level+1)
		}
		b.WriteString("\n" + strings.Repeat("    ", level) + "}")
	default:
		panic(fmt.Sprintf("gptdata: pyEncode of %T", v))
	}
}

// pyString quotes s as Python's json with ensure_ascii does: \" \\ \b \f \n
// \r \t, other characters outside ' '..'~' as \uXXXX (UTF-16 surrogate pairs
// above U+FFFF). A byte that is not UTF-8 is written as U+FFFD.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r >= ' ' && r <= '~':
				b.WriteRune(r)
			case r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				if r == utf8.RuneError {
					r = 0xfffd
				}
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// pyFloat returns Python's repr of f (as json writes it): the shortest
// digits that read back as f, in positional notation when the decimal
// exponent is in [−4, 16) (with ".0" when integral), else d.ddde±XX.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if x >= -4 && x < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if x < 0 {
		sign, x = "-", -x
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, x)
}

// describe returns the JSON description of ids and its hex MD5.
func describe(ids pyDict) (text, hash string) {
	text = pyDumps(ids)
	sum := md5.Sum([]byte(text))
	return text, hex.EncodeToString(sum[:])
}

// splitNames are the reference's Split names.
var splitNames = [3]string{"train", "valid", "test"}

// gptIdentifiers returns the reference's unique identifiers of a GPTDataset
// (without "tokenizer"): numSamples < 0 is None (one epoch); split and
// bookends are nil with per-split blends.
func gptIdentifiers(prefix string, numSamples, split int, cfg *Config, splitStr *string, bookends *[3]*bookend) pyDict {
	var ns, sp, sm any
	if numSamples >= 0 {
		ns = numSamples
	}
	if splitStr != nil {
		sp = *splitStr
	}
	if bookends != nil {
		m := make([]any, 3)
		for i, be := range bookends {
			if be == nil {
				continue
			}
			var lo any = be.lo
			if i == 0 {
				lo = pyInt0{}
			}
			m[i] = []any{lo, be.hi}
		}
		sm = m
	}
	return pyDict{
		{"class", "GPTDataset"},
		{"dataset_path", prefix},
		{"num_samples", ns},
		{"index_split", splitNames[split]},
		{"random_seed", int64(cfg.Seed)},
		{"sequence_length", cfg.SeqLength},
		{"split", sp},
		{"split_matrix", sm},
	}
}

// blendedIdentifiers returns the reference's unique identifiers of a
// BlendedDataset.
func blendedIdentifiers(parts []pyDict, split int, weights []float64, size int) pyDict {
	ds := make([]any, len(parts))
	for i, p := range parts {
		ds[i] = p
	}
	ws := make([]any, len(weights))
	for i, w := range weights {
		ws[i] = w
	}
	return pyDict{
		{"class", "BlendedDataset"},
		{"datasets", ds},
		{"split", splitNames[split]},
		{"weights", ws},
		{"size", size},
	}
}
