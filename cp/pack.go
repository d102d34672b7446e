package cp

// The packed layouts of the blockwise attention are per (batch row, head)
// pair: [pairs][rows][w], pair = batch row·h + head. The model's layouts
// are [rows, b, h·hw], hw values per head (3d for qkv, d for the output, 1
// for a per-head scalar).

// toPairs copies columns [off, off+w) of every head's hw values of x
// [rows, b, h·hw] into a new [pairs][rows][w].
func (p *plan) toPairs(x []float32, hw, off, w int) []float32 {
	rows, b, h := p.rows(), p.b, p.h
	out := make([]float32, p.pairs()*rows*w)
	for l := range rows {
		for bi := range b {
			src := x[(l*b+bi)*h*hw:]
			for hi := range h {
				pair := bi*h + hi
				copy(out[(pair*rows+l)*w:(pair*rows+l+1)*w], src[hi*hw+off:hi*hw+off+w])
			}
		}
	}
	return out
}

// fromPairs is toPairs' inverse: it copies src [pairs][rows][w] into
// columns [off, off+w) of every head's hw values of x [rows, b, h·hw].
func (p *plan) fromPairs(x, src []float32, hw, off, w int) {
	rows, b, h := p.rows(), p.b, p.h
	for l := range rows {
		for bi := range b {
			dst := x[(l*b+bi)*h*hw:]
			for hi := range h {
				pair := bi*h + hi
				copy(dst[hi*hw+off:hi*hw+off+w], src[(pair*rows+l)*w:(pair*rows+l+1)*w])
			}
		}
	}
}

// pack splits x [rows, b, h·3·d] (Megatron's per-head q, k, v columns) into
// Q [pairs][rows][d] and KV [pairs][rows][2d].
func (p *plan) pack(x []float32) (q, kv []float32) {
	return p.toPairs(x, 3*p.d, 0, p.d), p.toPairs(x, 3*p.d, p.d, 2*p.d)
}

// unpackQKV is pack's inverse: dx [rows, b, h·3·d] from dQ and dKV.
func (p *plan) unpackQKV(dq, dkv []float32) []float32 {
	dx := make([]float32, p.rows()*p.b*p.h*3*p.d)
	p.fromPairs(dx, dq, 3*p.d, 0, p.d)
	p.fromPairs(dx, dkv, 3*p.d, p.d, 2*p.d)
	return dx
}

// unpackOut turns the packed output [pairs][rows][d] into [rows, b, h·d].
func (p *plan) unpackOut(o []float32) []float32 {
	y := make([]float32, p.rows()*p.b*p.h*p.d)
	p.fromPairs(y, o, p.d, 0, p.d)
	return y
}
