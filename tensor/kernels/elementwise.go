package kernels

// Elementwise kernels. All run in float32 except SumSquares and ColumnSumInto, which
// accumulate in float64. Each panics if its slices' lengths differ (a programmer bug).

// AddInto sets dst[i] += a[i]. dst and a may alias exactly (dst = 2·dst).
func AddInto(dst, a []float32) {
	needLen("AddInto", "a", len(a), len(dst), "len(dst)")
	a = a[:len(dst)]
	if addIntoSIMD(dst, a) {
		return
	}
	for i := range dst {
		dst[i] += a[i]
	}
}

// Add sets dst[i] = a[i] + b[i]. dst may alias a or b exactly.
func Add(dst, a, b []float32) {
	needLen("Add", "a", len(a), len(dst), "len(dst)")
	needLen("Add", "b", len(b), len(dst), "len(dst)")
	a, b = a[:len(dst)], b[:len(dst)]
	if addSIMD(dst, a, b) {
		return
	}
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

// Scale sets x[i] *= s.
func Scale(x []float32, s float32) {
	if scaleSIMD(x, s) {
		return
	}
	for i := range x {
		x[i] *= s
	}
}

// Axpy sets dst[i] += alpha·x[i] (BLAS saxpy with unit strides). dst and x may alias exactly.
func Axpy(dst []float32, alpha float32, x []float32) {
	needLen("Axpy", "x", len(x), len(dst), "len(dst)")
	x = x[:len(dst)]
	if axpySIMD(dst, alpha, x) {
		return
	}
	for i := range dst {
		dst[i] += alpha * x[i]
	}
}

// SumSquares returns Σ x[i]², each square and the sum in float64 (four interleaved partial
// sums; eight lanes on the vector paths). The squares of float32 values are exact in
// float64, so the only error is the summation's, about len(x)·2^-53 relative: this is the
// norm² used for gradient clipping.
func SumSquares(x []float32) float64 {
	if s, ok := sumSquaresSIMD(x); ok {
		return s
	}
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		a, b, c, d := float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for _, v := range x[i:] {
		s0 += float64(v) * float64(v)
	}
	return (s0 + s1) + (s2 + s3)
}

// columnBlock is the number of columns ColumnSumInto accumulates at once in a stack buffer.
const columnBlock = 256

// ColumnSumInto sets dst[j] += Σ_r x[r·cols+j] for x of shape [rows, cols] and dst of
// length cols: the bias gradient of a linear layer. Each column is summed in float64 over
// the rows in order and rounded once when added to dst, so the result does not depend on
// how many rows there are beyond that rounding (nor on the build: the vector paths sum each
// column in the same order). No heap allocation (a 2 KiB stack buffer). dst must not
// overlap x.
func ColumnSumInto(dst, x []float32, rows, cols int) {
	needShape("ColumnSumInto", rows, cols)
	needLen("ColumnSumInto", "dst", len(dst), cols, "cols")
	needLen("ColumnSumInto", "x", len(x), rows*cols, "rows·cols")
	var acc [columnBlock]float64
	for c0 := 0; c0 < cols; c0 += columnBlock {
		w := min(columnBlock, cols-c0)
		a := acc[:w]
		clear(a)
		d := dst[c0 : c0+w]
		if columnSumSIMD(d, a, x, c0, rows, cols) {
			continue
		}
		for r := 0; r < rows; r++ {
			xr := x[r*cols+c0 : r*cols+c0+w]
			xr = xr[:len(a)]
			for j, v := range xr {
				a[j] += float64(v)
			}
		}
		d = d[:len(a)]
		for j, s := range a {
			d[j] = float32(float64(d[j]) + s)
		}
	}
}
