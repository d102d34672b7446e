//go:build !gotron_poison

package tensor

// poisoned reports whether Empty fills its tensors with NaN (the build tag
// gotron_poison).
const poisoned = false

func poisonFloat32(d []float32) []float32       { return d }
func poisonUint16(_ DType, d []uint16) []uint16 { return d }
