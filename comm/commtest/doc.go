// Package commtest is the conformance suite every comm.Group backend runs
// (in the manner of gonum's testblas): the in-process and the multi-process
// backends must give the same results and the same errors, so training code
// never knows which one runs.
//
// A backend's test calls Run with a Backend describing how to make a world:
//
//	func TestConformance(t *testing.T) {
//		commtest.Run(t, commtest.Backend{
//			NewWorld: func(n int, opts comm.Options) commtest.World { return local.NewWorld(n, opts) },
//			Sizes:    []int{1, 2, 3, 4},
//			Failures: true, Mismatches: true,
//		})
//	}
//
// Each Case is a per-rank function: it builds every member's input from the
// members' rank numbers, runs the operation, and compares the result with a
// plain serial loop (for reductions: element by element, ranks folded in
// order, bit for bit). So a multi-process backend, which runs the function
// once per process, checks the same things as the in-process one.
//
// Coverage: every operation and every dtype; lengths 0, 1, odd and not
// divisible by the group size; every reduction; subgroups (nested, partial,
// reordered) with collectives on many groups at once from several
// goroutines; async operations overlapping a blocking one; argument errors;
// and, for backends that support them, mismatched arguments between ranks,
// hang reports and failed, panicking and exiting ranks.
package commtest
