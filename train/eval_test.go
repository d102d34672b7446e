package train

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestEvalItersZeroSkipsEvaluation: --eval-iters 0 runs no evaluation (no
// validation line, a NaN validation loss) while the training is the same;
// --eval-iters 2 evaluates at the interval and at the end.
func TestEvalItersZeroSkipsEvaluation(t *testing.T) {
	run := func(evalIters int) (*Result, string) {
		a := mockArgs(4)
		a.EvalIters, a.EvalInterval = evalIters, 2
		var out strings.Builder
		res, err := Run(context.Background(), a, Options{Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		return res, out.String()
	}
	none, noneOut := run(0)
	two, twoOut := run(2)
	if !math.IsNaN(none.ValidLoss) || strings.Contains(noneOut, "validation loss") {
		t.Errorf("--eval-iters 0: validation loss %g, output:\n%s", none.ValidLoss, noneOut)
	}
	if math.IsNaN(two.ValidLoss) || strings.Count(twoOut, "validation loss at iteration") != 2 {
		t.Errorf("--eval-iters 2: validation loss %g, output:\n%s", two.ValidLoss, twoOut)
	}
	if fmt.Sprint(none.Losses) != fmt.Sprint(two.Losses) {
		t.Errorf("evaluation changed training: %v vs %v", none.Losses, two.Losses)
	}
}
