package kernels

// Elementwise kernels. All run in float32 except SumSquares and ColumnSumInto, which
// accumulate in float64. Each panics if its slices' lengths differ (a programmer bug). The
// vector paths give the same bits as the scalar loops.

// AddInto sets dst[i] += a[i]. dst and a may alias exactly (dst = 2·dst).
func AddInto(dst, a []float32) {
	needLen("AddInto", "a", len(a), len(dst), "len(dst)")
	a = a[:len(dst)]
	n := addIntoSIMD(dst, a)
	dst, a = dst[n:], a[n:]
	a = a[:len(dst)]
	for i := range dst {
		dst[i] += a[i]
	}
}

// Add sets dst[i] = a[i] + b[i]. dst may alias a or b exactly.
func Add(dst, a, b []float32) {
	needLen("Add", "a", len(a), len(dst), "len(dst)")
	needLen("Add", "b", len(b), len(dst), "len(dst)")
	a, b = a[:len(dst)], b[:len(dst)]
	n := addSIMD(dst, a, b)
	dst, a, b = dst[n:], a[n:], b[n:]
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

// Scale sets x[i] *= s.
func Scale(x []float32, s float32) {
	n := scaleSIMD(x, s)
	x = x[n:]
	for i := range x {
		x[i] *= s
	}
}

// Axpy sets dst[i] += alpha·x[i] (BLAS saxpy with unit strides), the product rounded before
// the add (never fused). dst and x may alias exactly.
func Axpy(dst []float32, alpha float32, x []float32) {
	needLen("Axpy", "x", len(x), len(dst), "len(dst)")
	x = x[:len(dst)]
	n := axpySIMD(dst, alpha, x)
	dst, x = dst[n:], x[n:]
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += float32(alpha * x[i])
	}
}

// SumSquares returns Σ x[i]², each square and the sum in float64 (in the eight lanes of
// [sum8]). The squares of float32 values are exact in float64, so the only error is the
// summation's, about len(x)·2^-53 relative: this is the norm² used for gradient clipping.
func SumSquares(x []float32) float64 {
	n, s := sumSquaresSIMD(x)
	return sumSquaresGo(&s, x[n:])
}

// sumSquaresGo is SumSquares' scalar loop, continuing the lanes s from an element with
// index ≡ 0 (mod 8).
func sumSquaresGo(s *sum8, x []float32) float64 {
	s0, s1, s2, s3, s4, s5, s6, s7 := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		a, b, c, d := float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
		a, b, c, d = float64(v[4]), float64(v[5]), float64(v[6]), float64(v[7])
		s4 += a * a
		s5 += b * b
		s6 += c * c
		s7 += d * d
	}
	*s = sum8{s0, s1, s2, s3, s4, s5, s6, s7}
	for k, v := range x[i:] {
		s[k] += float64(v) * float64(v)
	}
	return s.total()
}

// columnBlock is the number of columns ColumnSumInto accumulates at once in a stack buffer.
const columnBlock = 256

// ColumnSumInto sets dst[j] += Σ_r x[r·cols+j] for x of shape [rows, cols] and dst of
// length cols: the bias gradient of a linear layer. Each column is summed in float64 over
// the rows in order and rounded once when added to dst, so the result does not depend on
// how many rows there are beyond that rounding. No heap allocation (a 2 KiB stack buffer).
// dst must not overlap x.
func ColumnSumInto(dst, x []float32, rows, cols int) {
	needShape("ColumnSumInto", rows, cols)
	needLen("ColumnSumInto", "dst", len(dst), cols, "cols")
	needLen("ColumnSumInto", "x", len(x), rows*cols, "rows·cols")
	var acc [columnBlock]float64
	for c0 := 0; c0 < cols; c0 += columnBlock {
		w := min(columnBlock, cols-c0)
		a := acc[:w]
		clear(a)
		for r := 0; r < rows; r++ {
			widenAddInto(a, x[r*cols+c0:r*cols+c0+w])
		}
		d := dst[c0 : c0+w]
		d = d[:len(a)]
		n := narrowAddIntoSIMD(d, a)
		for j, s := range a[n:] {
			d[n+j] = float32(float64(d[n+j]) + s)
		}
	}
}

// widenAddInto sets a[j] += float64(x[j]) for len(x) = len(a).
func widenAddInto(a []float64, x []float32) {
	x = x[:len(a)]
	n := widenAddIntoSIMD(a, x)
	a, x = a[n:], x[n:]
	x = x[:len(a)]
	for j, v := range x {
		a[j] += float64(v)
	}
}
