package kernels

import "strconv"

// widen returns the float64 that the shortest decimal representation of f denotes: 0.9f
// becomes the double 0.9, not 0.89999997615814208984375. Hyperparameters are float32 in
// gotron's kernels but doubles in Python; widening them this way makes derived scalars such
// as Adam's 1 − β^t or dropout's 1/(1 − p) the same doubles torch computes before they are
// rounded to float32.
func widen(f float32) float64 {
	d, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil { // ±Inf and NaN format and parse back; nothing else can fail
		return float64(f)
	}
	return d
}
