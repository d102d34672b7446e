package kernels

import "math"

// Activation names an MLP activation for [ActivationForward], [ActivationBackward],
// [GLUForward] and [GLUBackward].
type Activation int

const (
	// GELUTanh is the tanh approximation of GELU (see [GeluForward]).
	GELUTanh Activation = iota
	// GELUErf is the exact GELU, x·Φ(x) = ½x(1 + erf(x/√2)) (torch.nn.functional.gelu).
	GELUErf
	// SiLU is x·σ(x) (torch.nn.functional.silu).
	SiLU
	// SquaredReLU is max(x, 0)².
	SquaredReLU
)

// ActivationForward sets y[i] = act(x[i]). y may alias x exactly. Panics if the lengths
// differ (a programmer bug).
//
// Accuracy: GELUTanh as [GeluForward]; GELUErf evaluates erf in float64 (math.Erf) and
// rounds once; SiLU is x/(1 + e^(−x)) with the float32 exponential of [GeluForward]
// (about 1 ulp); SquaredReLU is exact up to the float32 product.
func ActivationForward(act Activation, y, x []float32) {
	needLen("ActivationForward", "y", len(y), len(x), "len(x)")
	y = y[:len(x)]
	switch act {
	case GELUTanh:
		GeluForward(y, x)
	case GELUErf:
		for i, v := range x {
			y[i] = float32(0.5 * float64(v) * (1 + math.Erf(float64(v)*math.Sqrt2/2)))
		}
	case SiLU:
		for i, v := range x {
			y[i] = v * sigmoid(v)
		}
	case SquaredReLU:
		for i, v := range x {
			r := max(v, 0)
			y[i] = r * r
		}
	default:
		panic("kernels: ActivationForward: unknown activation")
	}
}

// ActivationBackward sets dx[i] = dy[i]·act'(x[i]), overwriting dx. dx may alias dy or x
// exactly. Panics if the lengths differ (a programmer bug).
func ActivationBackward(act Activation, dx, dy, x []float32) {
	needLen("ActivationBackward", "dy", len(dy), len(x), "len(x)")
	needLen("ActivationBackward", "dx", len(dx), len(x), "len(x)")
	dx, dy = dx[:len(x)], dy[:len(x)]
	switch act {
	case GELUTanh:
		GeluBackward(dx, dy, x)
	default:
		for i, v := range x {
			_, d := activationAt(act, v)
			dx[i] = dy[i] * d
		}
	}
}

// activationAt returns act(x) and act'(x):
//
//	GELUErf:     Φ(x) = ½(1 + erf(x/√2)), x·Φ(x);  Φ(x) + x·φ(x), φ(x) = e^(−x²/2)/√(2π)
//	SiLU:        s = σ(x), x·s;                    s·(1 + x·(1 − s))
//	SquaredReLU: r = max(x, 0), r²;                2r
//	GELUTanh:    as GeluForward and GeluBackward
func activationAt(act Activation, x float32) (y, d float32) {
	switch act {
	case GELUErf:
		v := float64(x)
		phi := 0.5 * (1 + math.Erf(v*math.Sqrt2/2))
		return float32(v * phi), float32(phi + v*math.Exp(-0.5*v*v)/math.Sqrt(2*math.Pi))
	case SiLU:
		s := sigmoid(x)
		return x * s, s * (1 + x*(1-s))
	case SquaredReLU:
		r := max(x, 0)
		return r * r, 2 * r
	case GELUTanh:
		return geluTanhAt(x)
	}
	panic("kernels: unknown activation")
}

// sigmoid returns 1/(1 + e^(−x)) in float32 (0 or 1 where e^(−x) leaves float32's range).
func sigmoid(x float32) float32 {
	z := -x
	if z >= expMin && z <= expMax {
		return 1 / (1 + expCore(z))
	}
	if z > 0 {
		return 0 // e^(−x) overflows: x < −87
	}
	return 1
}

// GLUForward is a gated linear unit: with u [rows, 2·cols] holding a gate and an up
// projection side by side (columns [0, cols) and [cols, 2·cols) of each row, as linear_fc1
// lays them out),
//
//	y[r,j] = act(gate[r,j]) · up[r,j]          y [rows, cols]
//
// With act = SiLU this is SwiGLU (Shazeer 2020). y must not overlap u. Panics if a length
// does not match the shape (a programmer bug).
func GLUForward(act Activation, y, u []float32, rows, cols int) {
	const op = "GLUForward"
	needShape(op, rows, cols)
	needLen(op, "u", len(u), 2*rows*cols, "2·rows·cols")
	needLen(op, "y", len(y), rows*cols, "rows·cols")
	for r := 0; r < rows; r++ {
		gate := u[2*r*cols : 2*r*cols+cols]
		up := u[2*r*cols+cols : 2*r*cols+2*cols]
		yr := y[r*cols : r*cols+cols]
		yr, up = yr[:len(gate)], up[:len(gate)]
		if act == SiLU {
			if !swigluRowSIMD(yr, gate, up) {
				swigluForwardGo(yr, gate, up)
			}
			continue
		}
		ActivationForward(act, yr, gate)
		for j := range yr {
			yr[j] *= up[j]
		}
	}
}

// GLUBackward is the gradient of [GLUForward], overwriting du [rows, 2·cols]:
//
//	dgate[r,j] = dy[r,j] · up[r,j] · act'(gate[r,j])
//	dup[r,j]   = dy[r,j] · act(gate[r,j])
//
// du must not overlap dy or u. Panics if a length does not match (a programmer bug).
func GLUBackward(act Activation, du, dy, u []float32, rows, cols int) {
	const op = "GLUBackward"
	needShape(op, rows, cols)
	needLen(op, "u", len(u), 2*rows*cols, "2·rows·cols")
	needLen(op, "du", len(du), 2*rows*cols, "2·rows·cols")
	needLen(op, "dy", len(dy), rows*cols, "rows·cols")
	for r := 0; r < rows; r++ {
		gate := u[2*r*cols : 2*r*cols+cols]
		up := u[2*r*cols+cols : 2*r*cols+2*cols]
		dg := du[2*r*cols : 2*r*cols+cols]
		dup := du[2*r*cols+cols : 2*r*cols+2*cols]
		dyr := dy[r*cols : r*cols+cols]
		up, dg, dup, dyr = up[:len(gate)], dg[:len(gate)], dup[:len(gate)], dyr[:len(gate)]
		if act == SiLU {
			if !swigluGradRowSIMD(dg, dup, dyr, gate, up) {
				swigluBackwardGo(dg, dup, dyr, gate, up)
			}
			continue
		}
		for j, g := range gate {
			a, d := activationAt(act, g)
			dup[j] = dyr[j] * a
			dg[j] = dyr[j] * up[j] * d
		}
	}
}

// geluTanhAt returns gelu(x) and gelu'(x) of the tanh form, as geluForwardGo and
// geluBackwardGo compute them.
func geluTanhAt(v float32) (y, d float32) {
	v2 := v * v
	z := v * (geluA + geluB*v2)
	if z >= expMin && z <= expMax {
		e := expCore(z)
		s := 1 / (1 + e)
		return v / (1 + e), s * (1 + v*(e*s)*(geluK+geluK*geluC*v2))
	}
	return v / (1 + expSlow(z)), geluGradOutside(z)
}

// swigluForwardGo sets y = g·σ(g)·up (SwiGLU's forward over one row, scalar).
func swigluForwardGo(y, gate, up []float32) {
	y, up = y[:len(gate)], up[:len(gate)]
	for j, g := range gate {
		y[j] = g * sigmoid(g) * up[j]
	}
}

// swigluBackwardGo is SwiGLU's gradient over one row (scalar): with s = σ(g),
// dup = dy·g·s and dg = dy·up·(s·(1 + g·(1 − s))).
func swigluBackwardGo(dg, dup, dy, gate, up []float32) {
	dg, dup, dy, up = dg[:len(gate)], dup[:len(gate)], dy[:len(gate)], up[:len(gate)]
	for j, g := range gate {
		s := sigmoid(g)
		dup[j] = dy[j] * g * s
		dg[j] = dy[j] * up[j] * (s * (1 + g*(1-s)))
	}
}
