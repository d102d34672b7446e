package tokenizer

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// maxRankToken bounds the length of a ranked token (r50k_base's longest has 128 bytes):
// ranksToMerges takes time cubic in it.
const maxRankToken = 256

// parseRanks parses a tiktoken ranks file (r50k_base.tiktoken): one token per line, its
// bytes in standard base64, a space, and its rank; the ranks must be 0, 1, 2, ... in order
// (a token's rank is its id). It returns the tokens' bytes by rank.
func parseRanks(name string, data []byte) ([]string, error) {
	var toks []string
	for n, line := range lines(data) {
		if line == "" {
			continue
		}
		b64, num, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("%s: line %d: want \"base64 rank\", got %q", name, n, clip(line))
		}
		tok, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(tok) == 0 || len(tok) > maxRankToken {
			return nil, fmt.Errorf("%s: line %d: %q is not the base64 of a token of 1 to %d bytes", name, n, clip(b64), maxRankToken)
		}
		rank, err := strconv.Atoi(num)
		if err != nil || rank != len(toks) {
			return nil, fmt.Errorf("%s: line %d: rank %q, want %d (ranks must count up from 0)", name, n, clip(num), len(toks))
		}
		toks = append(toks, string(tok))
	}
	return toks, nil
}

// ranksToMerges derives the BPE merges of a ranked vocabulary (tiktoken's form, where a
// token's rank is both its id and its merge priority): the merge that makes a token of
// rank r is found by encoding its bytes with the tokens of rank < r only (repeatedly
// joining the adjacent pair whose concatenation has the lowest rank, as tiktoken encodes)
// until two parts are left; those parts are the merge. Merges come out in rank order.
// Every single byte must be a token, and every longer token must split in two this way.
//
// For r50k_base (GPT-2's vocabulary) this gives GPT-2's merges.txt: r50k's ranks are
// GPT-2's encoder.json ids, and the 50000 tokens after the 256 bytes are the results of
// its 50000 merges, in merges.txt's order.
func ranksToMerges(toks []string) ([]mergeRule, error) {
	rank := make(map[string]int32, len(toks))
	for r, t := range toks {
		if _, dup := rank[t]; dup {
			return nil, fmt.Errorf("token %q has two ranks", clip(t))
		}
		rank[t] = int32(r)
	}
	for b := range 256 {
		if _, ok := rank[string([]byte{byte(b)})]; !ok {
			return nil, fmt.Errorf("the single byte 0x%02x is not a token", b)
		}
	}
	var rules []mergeRule
	var cut []int // part i is tok[cut[i]:cut[i+1]]
	for r, tok := range toks {
		if len(tok) < 2 {
			continue
		}
		cut = cut[:0]
		for i := 0; i <= len(tok); i++ {
			cut = append(cut, i)
		}
		for len(cut) > 3 {
			best, at := int32(-1), -1
			for i := 0; i+2 < len(cut); i++ {
				if q, ok := rank[tok[cut[i]:cut[i+2]]]; ok && q < int32(r) && (at < 0 || q < best) {
					best, at = q, i
				}
			}
			if at < 0 {
				break
			}
			cut = append(cut[:at+1], cut[at+2:]...)
		}
		if len(cut) != 3 {
			return nil, fmt.Errorf("token %d (%q) does not split into two tokens of lower rank", r, clip(tok))
		}
		rules = append(rules, mergeRule{rank[tok[:cut[1]]], rank[tok[cut[1]:]], int32(r)})
	}
	return rules, nil
}
