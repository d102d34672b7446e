package nn

import "github.com/gotron/gotron/autograd"

// AttentionPath is Attention with a bfloat16 attention's GEMMs on the
// path given (widened to float32, or native), whatever dnnl.Plan says.
func AttentionPath(t *autograd.Tape, qkv *autograd.Var, heads int, o AttentionOptions, widen bool) *autograd.Var {
	return attention(t, qkv, heads, o, widen)
}
