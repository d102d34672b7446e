package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// parsePost reads a tokenizer.json post_processor (raw, a part of data), which the reference's tokenize applies
// (it returns the Hugging Face tokenizer's input_ids), as the ids it puts before and after
// the text's:
//
//   - null, or ByteLevel: nothing (GPT-2's);
//   - RobertaProcessing, BertProcessing {"cls": [token, id], "sep": [token, id]}: cls
//     before, sep after;
//   - TemplateProcessing: its "single" template, a list of {"SpecialToken": {"id": name}}
//     (the ids of special_tokens[name]) around one {"Sequence": {"id": "A"}};
//   - Sequence {"processors": [...]}: each in turn, the later ones outside.
func parsePost(name, field string, data []byte, raw json.RawMessage) (prefix, suffix []int32, err error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil, nil
	}
	var p struct {
		Type       string            `json:"type"`
		CLS        []json.RawMessage `json:"cls"`
		SEP        []json.RawMessage `json:"sep"`
		Processors []json.RawMessage `json:"processors"`
		Single     []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int64 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, jsonError(name, field+".", err, offsetIn(data, raw))
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", name, field, fmt.Sprintf(format, args...))
	}
	switch p.Type {
	case "ByteLevel":
		return nil, nil, nil
	case "RobertaProcessing", "BertProcessing":
		cls, err1 := pairID(p.CLS)
		sep, err2 := pairID(p.SEP)
		if err1 != nil || err2 != nil {
			return nil, nil, bad("%s wants \"cls\" and \"sep\" as [token, id]", p.Type)
		}
		return []int32{cls}, []int32{sep}, nil
	case "TemplateProcessing":
		seq := false
		for i, piece := range p.Single {
			switch {
			case piece.Sequence != nil && piece.Sequence.ID == "A" && !seq:
				seq = true
			case piece.SpecialToken != nil:
				st, ok := p.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return nil, nil, bad("single[%d]: special token %q is not in special_tokens", i, piece.SpecialToken.ID)
				}
				for _, id := range st.IDs {
					if id < 0 || id >= maxVocab {
						return nil, nil, bad("special token %q: id %d is not in [0, %d)", piece.SpecialToken.ID, id, maxVocab)
					}
					if seq {
						suffix = append(suffix, int32(id))
					} else {
						prefix = append(prefix, int32(id))
					}
				}
			default:
				return nil, nil, bad("single[%d] is neither a SpecialToken nor the Sequence A", i)
			}
		}
		if !seq {
			return nil, nil, bad("the single template has no Sequence A")
		}
		return prefix, suffix, nil
	case "Sequence":
		for i, sub := range p.Processors {
			pre, suf, err := parsePost(name, fmt.Sprintf("%s.processors[%d]", field, i), data, sub)
			if err != nil {
				return nil, nil, err
			}
			prefix = append(append([]int32(nil), pre...), prefix...)
			suffix = append(suffix, suf...)
		}
		return prefix, suffix, nil
	}
	return nil, nil, bad("type %q is not supported; supported: ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, Sequence of these", p.Type)
}

// pairID returns the id of a [token, id] pair.
func pairID(pair []json.RawMessage) (int32, error) {
	var id int64
	if len(pair) != 2 || json.Unmarshal(pair[1], &id) != nil || id < 0 || id >= maxVocab {
		return 0, errors.New("want [token, id]")
	}
	return int32(id), nil
}

// configEOS returns the eos_token of tokenizer_config.json in dir, else of
// special_tokens_map.json, and the file it came from ("" when neither has one).
func configEOS(dir string) (eos, from string, err error) {
	for _, base := range []string{"tokenizer_config.json", "special_tokens_map.json"} {
		file := filepath.Join(dir, base)
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("--tokenizer-model: %v", err)
		}
		eos, ok, err := parseEOSConfig("--tokenizer-model "+file, data)
		if err != nil {
			return "", "", err
		}
		if ok {
			return eos, file, nil
		}
	}
	return "", "", nil
}

// parseEOSConfig reads the "eos_token" of a tokenizer_config.json or
// special_tokens_map.json: a string, or an object whose "content" is one; null or absent
// gives ok false.
func parseEOSConfig(name string, data []byte) (eos string, ok bool, err error) {
	var cfg struct {
		EOS json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", false, jsonError(name, "", err, 0)
	}
	if len(cfg.EOS) == 0 || isNull(cfg.EOS) {
		return "", false, nil
	}
	if json.Unmarshal(cfg.EOS, &eos) == nil && eos != "" {
		return eos, true, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(cfg.EOS, &obj) == nil && obj.Content != "" {
		return obj.Content, true, nil
	}
	return "", false, fmt.Errorf("%s: eos_token is %s, want a token string or {\"content\": token}", name, clipJSON(cfg.EOS))
}
