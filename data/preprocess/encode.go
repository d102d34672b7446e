package preprocess

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gotron/gotron/data/tokenizer"
)

// encode tokenizes a chunk: its JSON lines, or its plain-text document.
func (o *Options) encode(c chunk) encoded {
	e := encoded{seq: c.seq, bytes: int64(len(c.data)), keys: make([]keyTokens, len(o.JSONKeys))}
	if !c.json {
		if bytes.IndexByte(c.data, 0) >= 0 {
			e.counts.binary++
			return e
		}
		if err := o.addDocument(&e, [][]string{{string(c.data)}}); err != nil {
			e.err = fmt.Errorf("--input %s: %v", c.file, err)
		}
		return e
	}
	rest, line := c.data, c.line
	seqs := make([][]string, len(o.JSONKeys))
	for len(rest) > 0 {
		l := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			l, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		n := line
		line++
		if len(bytes.TrimSpace(l)) == 0 {
			e.counts.blank++
			continue
		}
		err := o.parse(l, seqs)
		if err == nil {
			err = o.addDocument(&e, seqs)
		}
		if err != nil {
			if o.SkipBadLines {
				e.counts.bad++
				continue
			}
			e.err = fmt.Errorf("--input %s:%d: %v: fix the line, or pass --skip-bad-lines to skip and count such lines", c.file, n, err)
			return e
		}
	}
	return e
}

// parse reads the keys' values of a JSON line into seqs (one list of sequences per key).
func (o *Options) parse(line []byte, seqs [][]string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("not valid JSON at byte %d of the line (%v)", se.Offset, se)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("holds a JSON %s, not an object with the keys %s", te.Value, strings.Join(o.JSONKeys, ", "))
		}
		return fmt.Errorf("not a JSON object (%v)", err)
	}
	for i, k := range o.JSONKeys {
		raw, ok := obj[k]
		if !ok {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, strconv.Quote(k))
			}
			slices.Sort(keys)
			return fmt.Errorf("no key %q (its keys: %s); choose the keys with --json-keys", k, strings.Join(keys, ", "))
		}
		seqs[i] = seqs[i][:0]
		switch v := bytes.TrimSpace(raw); {
		case len(v) > 0 && v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("key %q: %v", k, err)
			}
			seqs[i] = append(seqs[i], s)
		case len(v) > 0 && v[0] == '[':
			var list []string
			if err := json.Unmarshal(v, &list); err != nil {
				return fmt.Errorf("key %q holds a list that is not a list of strings", k)
			}
			seqs[i] = append(seqs[i], list...)
		default:
			return fmt.Errorf("key %q holds %.20s, not a string or a list of strings", k, v)
		}
	}
	return nil
}

// addDocument tokenizes one document, given as each key's sequences, into e: empty
// sequences are dropped and, with AppendEOD, a non-empty document's last sequence gets
// the end-of-document id. A tokenizer that can refuse text (NullTokenizer, whose text
// is ids) refuses the document, and nothing of it is added.
func (o *Options) addDocument(e *encoded, seqs [][]string) error {
	var ids [][][]int32
	for _, ss := range seqs {
		var keyIDs [][]int32
		for _, s := range ss {
			var v []int32
			if c, ok := o.Tokenizer.(tokenizer.CheckedEncoder); ok {
				var err error
				if v, err = c.EncodeChecked(s); err != nil {
					return err
				}
			} else {
				v = o.Tokenizer.Encode(s)
			}
			keyIDs = append(keyIDs, v)
		}
		ids = append(ids, keyIDs)
	}
	e.docs++
	for i, ss := range ids {
		k := &e.keys[i]
		n := 0
		for _, ids := range ss {
			if len(ids) == 0 {
				continue
			}
			k.tokens = append(k.tokens, ids...)
			k.seqLens = append(k.seqLens, len(ids))
			n++
		}
		if n > 0 && o.AppendEOD {
			k.tokens = append(k.tokens, o.Tokenizer.EOD())
			k.seqLens[len(k.seqLens)-1]++
		}
		k.nSeqs = append(k.nSeqs, n)
	}
	return nil
}
