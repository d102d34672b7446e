package hf

import (
	"fmt"
	"slices"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// mat is a row-major float32 tensor: a matrix [rows, cols], or a vector
// [n] (one column).
type mat struct {
	shape []int
	data  []float32
}

func (m mat) rows() int { return m.shape[0] }

// cols is the row length: 1 for a vector.
func (m mat) cols() int {
	if len(m.shape) == 1 {
		return 1
	}
	return m.shape[1]
}

// slice returns rows [lo, hi) (a copy).
func (m mat) slice(lo, hi int) mat {
	s := slices.Clone(m.shape)
	s[0] = hi - lo
	if m.data == nil {
		return mat{shape: s}
	}
	return mat{s, slices.Clone(m.data[lo*m.cols() : hi*m.cols()])}
}

// transpose returns the matrix's transpose.
func (m mat) transpose() mat {
	r, c := m.shape[0], m.shape[1]
	if m.data == nil {
		return mat{shape: []int{c, r}}
	}
	out := make([]float32, len(m.data))
	for i := range r {
		for j := range c {
			out[j*r+i] = m.data[i*c+j]
		}
	}
	return mat{[]int{c, r}, out}
}

// catRows stacks ms (equal row lengths) one after another.
func catRows(ms ...mat) mat {
	s := slices.Clone(ms[0].shape)
	s[0] = 0
	var data []float32
	for _, m := range ms {
		s[0] += m.rows()
		data = append(data, m.data...)
	}
	for _, m := range ms {
		if m.data == nil {
			return mat{shape: s}
		}
	}
	return mat{s, data}
}

// permuteRows returns m with row i taken from row from(i).
func (m mat) permuteRows(from func(i int) int) mat {
	c := m.cols()
	if m.data == nil {
		return m
	}
	out := make([]float32, len(m.data))
	for i := range m.rows() {
		copy(out[i*c:(i+1)*c], m.data[from(i)*c:(from(i)+1)*c])
	}
	return mat{slices.Clone(m.shape), out}
}

// put appends m to out as the tensor name, unless an error came first.
func (t *taker) put(out *[]safetensors.Tensor, name string, m mat) {
	if t.err == nil {
		*out = append(*out, safetensors.F32(name, m.shape, m.data))
	}
}

// zeros is a vector of n zeros.
func zeros(n int) mat { return mat{[]int{n}, make([]float32, n)} }

// weights are a checkpoint's tensors as float32, noting which were taken.
type weights struct {
	source string
	m      map[string]mat
	taken  map[string]bool
}

func newWeights(ts []safetensors.Tensor, source string) (*weights, error) {
	w := &weights{source: source, m: map[string]mat{}, taken: map[string]bool{}}
	for _, t := range ts {
		d, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("hf: %s: %w", source, err)
		}
		if _, dup := w.m[t.Name]; dup {
			return nil, fmt.Errorf("hf: %s holds %s twice", source, t.Name)
		}
		w.m[t.Name] = mat{slices.Clone(t.Shape), d}
	}
	return w, nil
}

func (w *weights) has(name string) bool { _, ok := w.m[name]; return ok }

// take returns the tensor name, which must have the given shape.
func (w *weights) take(name string, shape ...int) (mat, error) {
	m, ok := w.m[name]
	switch {
	case !ok:
		return mat{}, fmt.Errorf("hf: %s has no tensor %s (shape %v)", w.source, name, shape)
	case !slices.Equal(m.shape, shape):
		return mat{}, fmt.Errorf("hf: %s: %s has shape %v, the config says %v", w.source, name, m.shape, shape)
	}
	w.taken[name] = true
	return m, nil
}

// skip marks name taken without reading it (a buffer the other side
// recomputes).
func (w *weights) skip(name string) { w.taken[name] = true }

// unused lists the tensors not taken, sorted.
func (w *weights) unused() []string {
	var out []string
	for name := range w.m {
		if !w.taken[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// taker takes tensors one after another, keeping the first error.
type taker struct {
	w   *weights
	err error
}

// take returns the tensor name of the given shape; after an error, a
// mat without data, which the mat operations pass on and put drops.
func (t *taker) take(name string, shape ...int) mat {
	if t.err != nil {
		return mat{shape: shape}
	}
	m, err := t.w.take(name, shape...)
	if err != nil {
		t.err = err
		return mat{shape: shape}
	}
	return m
}

// qkvLayout is the shape of an attention's query, key and value rows:
// heads query heads in groups key/value groups, d rows each.
type qkvLayout struct{ heads, groups, d int }

// megatron stacks q [heads·d, …], k and v [groups·d, …] as Megatron's
// linear_qkv: for each group its heads/groups query heads, its key head,
// its value head.
func (l qkvLayout) megatron(q, k, v mat) mat {
	per := l.heads / l.groups
	var parts []mat
	for g := range l.groups {
		parts = append(parts, q.slice(g*per*l.d, (g+1)*per*l.d), k.slice(g*l.d, (g+1)*l.d), v.slice(g*l.d, (g+1)*l.d))
	}
	return catRows(parts...)
}

// split is megatron's inverse.
func (l qkvLayout) split(qkv mat) (q, k, v mat) {
	per := l.heads / l.groups
	var qs, ks, vs []mat
	for g := range l.groups {
		base := g * (per + 2) * l.d
		qs = append(qs, qkv.slice(base, base+per*l.d))
		ks = append(ks, qkv.slice(base+per*l.d, base+(per+1)*l.d))
		vs = append(vs, qkv.slice(base+(per+1)*l.d, base+(per+2)*l.d))
	}
	return catRows(qs...), catRows(ks...), catRows(vs...)
}

// halvesFromPairs permutes the rows of every d-row head of m from the
// interleaved rotary form (channels 2i and 2i+1 rotate together) to the
// halves form (i and i + d/2), or back with inverse.
func halvesFromPairs(m mat, d int, inverse bool) mat {
	return m.permuteRows(func(r int) int {
		head, i := r/d*d, r%d
		if inverse { // row i of the pairs form holds halves row …
			return head + i/2 + (i%2)*(d/2)
		}
		if i < d/2 {
			return head + 2*i
		}
		return head + 2*(i-d/2) + 1
	})
}
