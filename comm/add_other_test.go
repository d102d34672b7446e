//go:build !amd64

package comm

// addImpls returns the float32 addition kernels, by name, for
// TestAddKernels.
func addImpls() []addImpl { return []addImpl{{"go", addTo, addDup}} }
