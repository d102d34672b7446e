package comm

// addImpls returns the float32 addition kernels this processor can run, by
// name, for TestAddKernels.
func addImpls() []addImpl {
	impls := []addImpl{{"sse", addToSSE, addDupSSE}}
	if haveAVX2 {
		impls = append(impls, addImpl{"avx2", addToAVX2, addDupAVX2})
	}
	return impls
}
