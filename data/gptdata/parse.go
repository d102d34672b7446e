package gptdata

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// defaultSplit is the split the reference uses when --data-path comes without
// --split.
const defaultSplit = "969, 30, 1"

// ParseBlend parses the values of --data-path (or of a --train/valid/test-
// data-path) as the reference's get_blend_from_list does: one prefix
// "PREFIX", weighted prefixes "W1 P1 W2 P2 …", or prefixes "P1 P2 …" (weighed
// by their sizes when built). Values holding spaces are split at them (so a
// list may come as one string); prefixes are trimmed.
//
// Unlike the reference, which reads any list it cannot pair as prefixes, a
// value that parses as a number where a prefix belongs is an error (a
// missing weight or prefix), as is a weight that is not a positive finite
// number.
func ParseBlend(args []string) (Blend, error) {
	var vals []string
	for _, a := range args {
		vals = append(vals, strings.Fields(a)...)
	}
	if len(vals) == 0 {
		return Blend{}, fmt.Errorf("--data-path: no dataset prefix given (want PREFIX, W1 P1 W2 P2 …, or P1 P2 …)")
	}
	isNum := func(s string) bool { _, err := strconv.ParseFloat(s, 64); return err == nil }
	weighted := len(vals)%2 == 0
	for i := 0; weighted && i < len(vals); i += 2 {
		weighted = isNum(vals[i])
	}
	var b Blend
	for i := 0; i < len(vals); i++ {
		if weighted && i%2 == 0 {
			w, _ := strconv.ParseFloat(vals[i], 64)
			if !(w > 0) || math.IsInf(w, 0) {
				return Blend{}, fmt.Errorf("--data-path: weight %q (value %d) is not a positive finite number", vals[i], i+1)
			}
			b.Weights = append(b.Weights, w)
			continue
		}
		if isNum(vals[i]) {
			return Blend{}, fmt.Errorf("--data-path: value %d, %q, is a number where a dataset prefix belongs (want PREFIX, W1 P1 W2 P2 …, or P1 P2 …)", i+1, vals[i])
		}
		b.Prefixes = append(b.Prefixes, vals[i])
	}
	return b, nil
}

// ParseSplit parses --split as the reference's parse_and_normalize_split
// does: up to three non-negative numbers separated by commas (spaces around
// them are allowed), padded with zeros to three and divided by their sum:
// "969,30,1" → [0.969, 0.03, 0.001]. The train, valid and test splits are
// then the bookends [0, c1), [c1, c2), [c2, c3) of the running sums c of the
// result, an empty bookend being no split.
func ParseSplit(s string) ([3]float64, error) {
	var v [3]float64
	fields := strings.Split(s, ",")
	if len(fields) > 3 {
		return v, fmt.Errorf("--split %q: %d values, want up to three (train, valid, test), e.g. 969,30,1", s, len(fields))
	}
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if !isDecimal(f) {
			return v, fmt.Errorf("--split %q: value %d, %q, is not a non-negative decimal number (want e.g. 969,30,1)", s, i+1, f)
		}
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsInf(x, 0) {
			return v, fmt.Errorf("--split %q: value %d, %q, is out of range", s, i+1, f)
		}
		v[i] = x
	}
	sum := npSum(v[:])
	if !(sum > 0) || math.IsInf(sum, 0) {
		return v, fmt.Errorf("--split %q: the values sum to %v, want a positive finite sum", s, sum)
	}
	for i := range v {
		v[i] /= sum
	}
	return v, nil
}

// isDecimal reports whether s is digits with at most one '.', and at least
// one digit.
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// bookend is one split's share [lo, hi) of a dataset's documents.
type bookend struct{ lo, hi float64 }

// splitBookends returns the splits' bookends of a normalised split vector
// (the reference's convert_split_vector_to_split_matrix): nil for an empty
// split.
func splitBookends(v [3]float64) [3]*bookend {
	var m [3]*bookend
	c := 0.0
	for i, x := range v {
		lo, hi := c, c+x
		c = hi
		if hi > lo {
			m[i] = &bookend{lo, hi}
		}
	}
	return m
}

// documents returns the documents [round(lo·n), round(hi·n)) of a split of
// n (Python's round: half to even).
func (b bookend) documents(n int) (beg, end int) {
	return int(math.RoundToEven(b.lo * float64(n))), int(math.RoundToEven(b.hi * float64(n)))
}

// npSum is numpy.sum of float64 values: pairwise summation (blocks of up to
// 128 values summed with eight accumulators, fewer than eight in order).
func npSum(a []float64) float64 {
	n := len(a)
	switch {
	case n < 8:
		s := 0.0
		for _, x := range a {
			s += x
		}
		return s
	case n <= 128:
		var r [8]float64
		copy(r[:], a[:8])
		i := 8
		for ; i < n-n%8; i += 8 {
			for j := range r {
				r[j] += a[i+j]
			}
		}
		s := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			s += a[i]
		}
		return s
	default:
		n2 := n / 2
		n2 -= n2 % 8
		return npSum(a[:n2]) + npSum(a[n2:])
	}
}

// normalize divides the weights by their numpy sum (the reference's
// normalize).
func normalize(w []float64) []float64 {
	s := npSum(w)
	out := make([]float64, len(w))
	for i, x := range w {
		out[i] = x / s
	}
	return out
}

// NumSamples returns the samples each split must provide for a run, as the
// reference's get_train_valid_test_num_samples computes them:
//
//	train = trainIters·globalBatchSize
//	valid = (trainIters div evalInterval + 1)·evalIters·globalBatchSize
//	test  = evalIters·globalBatchSize
//
// (every evaluation of the reference reads new validation samples). The
// counts enter the datasets' descriptions and, through the number of epochs,
// their order: pass these to reproduce the reference's samples.
func NumSamples(trainIters, globalBatchSize, evalInterval, evalIters int) ([3]int, error) {
	if trainIters < 0 || globalBatchSize < 0 || evalIters < 0 || evalInterval < 1 {
		return [3]int{}, fmt.Errorf("gptdata: NumSamples(train iters %d, global batch size %d, eval interval %d, eval iters %d): want counts ≥ 0 and an interval ≥ 1",
			trainIters, globalBatchSize, evalInterval, evalIters)
	}
	const limit = 1 << 53
	points := trainIters/evalInterval + 1
	if float64(trainIters)*float64(globalBatchSize) >= limit || float64(points)*float64(evalIters)*float64(globalBatchSize) >= limit {
		return [3]int{}, fmt.Errorf("gptdata: NumSamples: %d iterations of %d samples is too many", trainIters, globalBatchSize)
	}
	return [3]int{trainIters * globalBatchSize, points * evalIters * globalBatchSize, evalIters * globalBatchSize}, nil
}
