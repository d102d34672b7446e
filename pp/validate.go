package pp

import (
	"fmt"
	"strings"
)

// The command-line flags the messages propose, spelled as Megatron's.
const (
	flagPP           = "--pipeline-model-parallel-size"
	flagVPP          = "--virtual-pipeline-model-parallel-size"
	flagGroupSize    = "--microbatch-group-size-per-virtual-pipeline-stage"
	flagMicrobatches = "--num-microbatches"
)

// ValidateInterleaved checks the interleaved schedule's rules on the number
// of microbatches M, the pipeline size P and G = groupSize, the
// microbatch_group_size_per_vp_stage (schedules.py
// forward_backward_pipelining_with_interleaving, docs/SEMANTICS.md
// § Interleaved schedule table):
//
//	P ≤ G ≤ M
//	M mod G = 0 or M mod G ≥ P   (a shorter last group leaves bubbles)
//
// The reference raises ValueError and RuntimeError; gotron returns an error
// that shows the arithmetic and proposes the nearest valid group sizes and
// microbatch counts. The counts are given as counts, not as a flag: a
// training run's microbatches come from its global batch, gotron bench's
// and inspect's from --num-microbatches.
func ValidateInterleaved(pp, m, groupSize int) error {
	g := groupSize
	switch {
	case pp < 1:
		return fmt.Errorf("pipeline_model_parallel_size = %d: must be ≥ 1 (%s)", pp, flagPP)
	case m < 1:
		return fmt.Errorf("num_microbatches = %d: there must be at least 1 microbatch per iteration (%s)", m, flagMicrobatches)
	case g < 1:
		return fmt.Errorf("microbatch_group_size_per_vp_stage = %d: must be ≥ 1, or unset to use pipeline_model_parallel_size = %d (%s)", g, pp, flagGroupSize)
	}
	if g < pp || g > m {
		msg := fmt.Sprintf("microbatch_group_size_per_vp_stage = %d must lie in [pipeline_model_parallel_size, num_microbatches] = [%d, %d] for the interleaved schedule", g, pp, m)
		if m < pp {
			msg += fmt.Sprintf(", an empty range since num_microbatches = %d < %d: choose %d or more microbatches", m, pp, max(pp, g))
			if g >= pp {
				msg += fmt.Sprintf(" (%d keeps this group size)", g)
			} else {
				msg += fmt.Sprintf(" with %s between %d and it", flagGroupSize, pp)
			}
			return fmt.Errorf("%s", msg)
		}
		valid := ValidGroupSizes(pp, m)
		msg += fmt.Sprintf(": choose %s %d (valid for num_microbatches = %d and pipeline_model_parallel_size = %d: %s)",
			flagGroupSize, nearest(valid, g), m, pp, listInts(valid))
		if g > m {
			msg += fmt.Sprintf(", or %d microbatches", g)
		}
		return fmt.Errorf("%s", msg)
	}
	if r := m % g; r > 0 && r < pp {
		noun := "microbatches"
		if r == 1 {
			noun = "microbatch"
		}
		valid := ValidGroupSizes(pp, m)
		return fmt.Errorf("microbatch_group_size_per_vp_stage = %d with num_microbatches = %d leaves %d mod %d = %d %s in the last group, "+
			"fewer than pipeline_model_parallel_size = %d, which leaves dependency bubbles in the interleaved schedule: "+
			"choose %s %d (valid for %d microbatches on %d stages: %s), or %s microbatches",
			g, m, m, g, r, noun, pp, flagGroupSize, nearest(valid, g), m, pp, listInts(valid),
			orInts(nearestMicrobatches(pp, g, m)))
	}
	return nil
}

// validGroup reports whether G is a valid microbatch group size for M
// microbatches on P stages.
func validGroup(pp, m, g int) bool {
	return g >= pp && g <= m && (m%g == 0 || m%g >= pp)
}

// ValidGroupSizes returns every valid microbatch_group_size_per_vp_stage for
// M microbatches on P stages, in increasing order: G ∈ [P, M] with
// M mod G = 0 or ≥ P. It is empty when M < P. G = M is always valid then.
func ValidGroupSizes(pp, m int) []int {
	var gs []int
	for g := max(pp, 1); g <= m; g++ {
		if validGroup(pp, m, g) {
			gs = append(gs, g)
		}
	}
	return gs
}

// nearestMicrobatches returns the microbatch counts nearest to M for which
// G is a valid group size on P stages (one, or two at equal distance).
func nearestMicrobatches(pp, g, m int) []int {
	if validGroup(pp, m, g) {
		return []int{m}
	}
	for d := 1; ; d++ {
		var out []int
		if m-d >= g && validGroup(pp, m-d, g) {
			out = append(out, m-d)
		}
		if validGroup(pp, m+d, g) {
			out = append(out, m+d)
		}
		if len(out) > 0 {
			return out
		}
	}
}

// nearest returns the element of the non-empty sorted xs closest to x (the
// smaller one on a tie).
func nearest(xs []int, x int) int {
	best := xs[0]
	for _, v := range xs[1:] {
		if absInt(v-x) < absInt(best-x) {
			best = v
		}
	}
	return best
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// listInts formats xs as "2, 4, 5, 7", eliding the middle of a long list.
func listInts(xs []int) string {
	const head, tail = 6, 2
	var parts []string
	if len(xs) <= head+tail+1 {
		for _, x := range xs {
			parts = append(parts, fmt.Sprint(x))
		}
		return strings.Join(parts, ", ")
	}
	for _, x := range xs[:head] {
		parts = append(parts, fmt.Sprint(x))
	}
	parts = append(parts, "…")
	for _, x := range xs[len(xs)-tail:] {
		parts = append(parts, fmt.Sprint(x))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (%d values)", len(xs))
}

// orInts formats one or two ints as "6" or "6 or 8".
func orInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, " or ")
}
