package cp

// pack splits x [rows, b, h·3·d] (Megatron's per-head q, k, v columns) into
// Q [pairs][rows][d] and KV [pairs][rows][2d], pair = batch row·h + head.
func (p *plan) pack(x []float32) (q, kv []float32) {
	rows, b, h, d := p.rows(), p.b, p.h, p.d
	q, kv = make([]float32, p.pairs()*rows*d), make([]float32, p.pairs()*rows*2*d)
	for l := range rows {
		for bi := range b {
			src := x[(l*b+bi)*h*3*d:]
			for hi := range h {
				pair := bi*h + hi
				s := src[hi*3*d:]
				copy(q[(pair*rows+l)*d:(pair*rows+l+1)*d], s[:d])
				copy(kv[(pair*rows+l)*2*d:(pair*rows+l+1)*2*d], s[d:3*d])
			}
		}
	}
	return q, kv
}

// unpackQKV is pack's inverse: dx [rows, b, h·3·d] from dQ and dKV.
func (p *plan) unpackQKV(dq, dkv []float32) []float32 {
	rows, b, h, d := p.rows(), p.b, p.h, p.d
	dx := make([]float32, rows*b*h*3*d)
	for l := range rows {
		for bi := range b {
			dst := dx[(l*b+bi)*h*3*d:]
			for hi := range h {
				pair := bi*h + hi
				s := dst[hi*3*d:]
				copy(s[:d], dq[(pair*rows+l)*d:(pair*rows+l+1)*d])
				copy(s[d:3*d], dkv[(pair*rows+l)*2*d:(pair*rows+l+1)*2*d])
			}
		}
	}
	return dx
}

// packOut turns y [rows, b, h·d] (the output's layout, head-major) into
// [pairs][rows][d].
func (p *plan) packOut(y []float32) []float32 {
	rows, b, h, d := p.rows(), p.b, p.h, p.d
	out := make([]float32, p.pairs()*rows*d)
	for l := range rows {
		for bi := range b {
			src := y[(l*b+bi)*h*d:]
			for hi := range h {
				pair := bi*h + hi
				copy(out[(pair*rows+l)*d:(pair*rows+l+1)*d], src[hi*d:(hi+1)*d])
			}
		}
	}
	return out
}

// packRows turns one value per (row, batch row, head), [rows, b, h], into
// [pairs][rows].
func (p *plan) packRows(x []float32) []float32 {
	rows, b, h := p.rows(), p.b, p.h
	out := make([]float32, len(x))
	for l := range rows {
		for bi := range b {
			for hi := range h {
				out[(bi*h+hi)*rows+l] = x[(l*b+bi)*h+hi]
			}
		}
	}
	return out
}

// unpackOut is packOut's inverse.
func (p *plan) unpackOut(o []float32) []float32 {
	rows, b, h, d := p.rows(), p.b, p.h, p.d
	y := make([]float32, rows*b*h*d)
	for l := range rows {
		for bi := range b {
			dst := y[(l*b+bi)*h*d:]
			for hi := range h {
				pair := bi*h + hi
				copy(dst[hi*d:(hi+1)*d], o[(pair*rows+l)*d:(pair*rows+l+1)*d])
			}
		}
	}
	return y
}
