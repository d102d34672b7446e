//go:build gotron_poison

package dp

// poisonReleased says the FSDP's released whole buffers are filled with
// NaN before reuse (build tag gotron_poison), so that a kernel that kept a
// slice of a released parameter past its release reads NaN, not another
// unit's numbers.
const poisonReleased = true
