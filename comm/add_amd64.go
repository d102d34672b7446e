package comm

// addTo sets dst[i] = x[i] + y[i] for i < len(dst) (SSE, add_amd64.s). The
// caller guarantees len(x), len(y) ≥ len(dst); dst may be x or y.
//
//go:noescape
func addTo(dst, x, y []float32)

// addDup sets d0[i] = d1[i] = x[i] + y[i] for i < len(d0) (SSE,
// add_amd64.s). The caller guarantees the other lengths are ≥ len(d0); d0
// and d1 may be x and y.
//
//go:noescape
func addDup(d0, d1, x, y []float32)
