//go:build !amd64

package comm

// addTo sets dst[i] = x[i] + y[i] for i < len(dst); dst may be x or y.
func addTo(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for i := range dst {
		dst[i] = x[i] + y[i]
	}
}

// addDup sets d0[i] = d1[i] = x[i] + y[i] for i < len(d0); d0 and d1 may
// be x and y.
func addDup(d0, d1, x, y []float32) {
	d1, x, y = d1[:len(d0)], x[:len(d0)], y[:len(d0)]
	for i := range d0 {
		s := x[i] + y[i]
		d0[i] = s
		d1[i] = s
	}
}
