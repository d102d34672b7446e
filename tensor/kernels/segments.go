package kernels

import "math"

// Document masking of attention scores (Megatron's --reset-attention-mask): a packed row holds
// several documents, numbered by a segment id per position, and a query attends only to the
// keys of its own document. The mask is applied to the raw scores as −Inf before the softmax
// kernels, which give a −Inf score probability exactly 0 (expAffine) and so a zero gradient.

// SegmentMask sets p[i,j] = −Inf for every live entry of an m×n score block (row stride ld,
// live columns j < BlockLive(i, n, offset), as the block softmax kernels read them) whose
// query and key lie in different segments, qseg[i] ≠ kseg[j]. Other entries are left as they
// are. For a whole causal s×s matrix pass offset 0 and qseg = kseg = the row's segments.
// Panics if the shapes do not fit (a programmer bug).
func SegmentMask(p []float32, ld, m, n, offset int, qseg, kseg []int32) {
	const op = "SegmentMask"
	checkBlock(op, "p", p, ld, m, n)
	needLen(op, "qseg", len(qseg), m, "m")
	needLen(op, "kseg", len(kseg), n, "n")
	inf := float32(math.Inf(-1))
	for i, sq := range qseg {
		row := p[i*ld : i*ld+BlockLive(i, n, offset)]
		for j, sk := range kseg[:len(row)] {
			if sk != sq {
				row[j] = inf
			}
		}
	}
}

// SegmentsMeet reports whether some live entry of an m×n block with the given causal offset
// pairs a query and a key of the same segment, that is whether SegmentMask leaves the block any
// live score. It is conservative (it may say true for a block that SegmentMask masks wholly)
// and cheap, O(m + n): false only when the key segments lie all above or all below the query
// segments' range, or no entry is live. A block for which it is false contributes nothing and
// may be skipped.
func SegmentsMeet(m, n, offset int, qseg, kseg []int32) bool {
	if m == 0 || n == 0 || BlockLive(m-1, n, offset) == 0 {
		return false
	}
	qlo, qhi := rangeOf(qseg)
	klo, khi := rangeOf(kseg)
	return khi >= qlo && klo <= qhi
}

// rangeOf returns the least and greatest of the non-empty s.
func rangeOf(s []int32) (lo, hi int32) {
	lo, hi = s[0], s[0]
	for _, v := range s[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}
