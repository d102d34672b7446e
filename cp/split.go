package cp

// Chunks returns the chunk indices rank r of a context-parallel group of size
// cp holds under the load-balanced split for causal attention: the sequence
// is cut into 2·cp equal chunks and rank r keeps chunks r and 2·cp−1−r, in
// that order (Megatron's get_batch_on_this_cp_rank). Every rank then holds
// one early and one late chunk, and does the same causal attention work.
func Chunks(cp, r int) [2]int { return [2]int{r, 2*cp - 1 - r} }

// Positions returns the global positions of the s/cp rows rank r holds of a
// sequence of s tokens, in its local order: chunk r then chunk 2·cp−1−r.
func Positions(s, cp, r int) []int {
	c := s / (2 * cp)
	out := make([]int, 0, 2*c)
	for _, k := range Chunks(cp, r) {
		for i := range c {
			out = append(out, k*c+i)
		}
	}
	return out
}

// Split returns rank r's part of x, a row-major [b, s] array (token ids,
// labels, a loss mask, position ids): [b, s/cp], each row holding chunks r
// and 2·cp−1−r of its sequence. s must be a multiple of 2·cp (CheckSequence).
// For cp = 1 it returns x.
func Split[T any](x []T, b, s, cp, r int) []T {
	if cp == 1 {
		return x
	}
	c := s / (2 * cp)
	out := make([]T, 0, b*2*c)
	for j := range b {
		row := x[j*s : (j+1)*s]
		for _, k := range Chunks(cp, r) {
			out = append(out, row[k*c:(k+1)*c]...)
		}
	}
	return out
}

// Gather is the inverse of Split over the whole group: parts[r] is rank r's
// [b, s/cp] part; the result is the [b, s] array. It is what tests and tools
// use to see a split sequence whole.
func Gather[T any](parts [][]T, b, s int) []T {
	cp := len(parts)
	if cp == 1 {
		return parts[0]
	}
	c := s / (2 * cp)
	out := make([]T, b*s)
	for r, p := range parts {
		for j := range b {
			for i, k := range Chunks(cp, r) {
				copy(out[j*s+k*c:j*s+(k+1)*c], p[j*2*c+i*c:j*2*c+(i+1)*c])
			}
		}
	}
	return out
}

// Work returns the causal attention score pairs (query, key at or before
// it) whose products rank r of a context-parallel group of size cp
// computes for one head and batch row of a sequence of s tokens, counted
// over the blocks its queries attend to: c² for a chunk before the query
// chunk, c(c+1)/2 for the query chunk itself, c = s/(2·cp). Forward's
// FLOPs are 4·d·Work (Q·Kᵀ and P·V), backward's twice that.
//
// With the zigzag split every rank's Work is c²·(2·cp−1) + c·(c+1): the
// same on every rank. contiguous counts the plain split (rank r holding
// chunks 2r and 2r+1) instead, for comparison: rank cp−1 then does about
// 2·cp−1 times rank 0's work.
func Work(s, cp, r int, contiguous bool) int64 {
	c := int64(s / (2 * cp))
	mine := Chunks(cp, r)
	if contiguous {
		mine = [2]int{2 * r, 2*r + 1}
	}
	var n int64
	for _, q := range mine {
		for k := 0; k < 2*cp; k++ {
			switch {
			case k < q:
				n += c * c
			case k == q:
				n += c * (c + 1) / 2
			}
		}
	}
	return n
}
