package moe

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// epResult is one rank's outputs and gradients.
type epResult struct {
	y, dx, dprobs []float32
	dw1, dw2      map[int][]float32 // by global expert
}

// runExperts runs rank r's tokens through permute → (dispatch) → experts →
// (combine) → unpermute and backward from Σ y·w: with g nil on one rank
// holding every expert, else on the expert-parallel group g holding
// experts [rank·E/ep, (rank+1)·E/ep).
func runExperts(ctx context.Context, g comm.Group, r, tokens, h, e, f int, drop bool, dispatcher string) (epResult, error) {
	const k = 2
	tape := autograd.NewTape(ctx)
	x := autograd.NewLeaf(tensor.FromSlice(randn(uint64(100+r), tokens*h, 1), tokens, h), "x", true)
	rt, err := Route(randn(uint64(200+r), tokens*e, 1), tokens, RouterOptions{NumExperts: e, TopK: k})
	if err != nil {
		return epResult{}, err
	}
	if drop {
		if _, err := rt.Drop(DropOptions{CapacityFactor: 1}); err != nil {
			return epResult{}, err
		}
	}
	probs := autograd.NewLeaf(tensor.FromSlice(append([]float32(nil), rt.Probs...), tokens, e), "probs", true)
	first, n := 0, e
	if g != nil {
		n = e / g.Size()
		first = g.Rank() * n
	}
	w1, w2 := make([]*autograd.Var, n), make([]*autograd.Var, n)
	for j := range n {
		w1[j] = autograd.NewLeaf(tensor.FromSlice(randn(uint64(300+first+j), 2*f*h, 0.3), 2*f, h), "w1", true)
		w2[j] = autograd.NewLeaf(tensor.FromSlice(randn(uint64(400+first+j), h*f, 0.3), h, f), "w2", true)
		w1[j].MarkParameter()
		w2[j].MarkParameter()
	}
	var y *autograd.Var
	if g != nil && dispatcher == "allgather" {
		plan, err := NewAllGatherExchange(ctx, g, rt.Map, tokens, e, first, n)
		if err != nil {
			return epResult{}, err
		}
		yp := GroupedMLP(tape, plan.Dispatch(tape, x), Experts{W1: w1, W2: w2}, plan.Local(), MLPOptions{Act: kernels.SiLU, Gated: true})
		y = plan.Combine(tape, yp, probs)
	} else {
		d := NewDispatch(rt.Map, tokens, e)
		xp := Permute(tape, x, d)
		counts := d.Counts
		var plan *EPExchange
		if g != nil {
			if plan, err = NewEPExchange(ctx, g, d.Counts); err != nil {
				return epResult{}, err
			}
			xp, counts = plan.Dispatch(tape, xp), plan.Local
		}
		yp := GroupedMLP(tape, xp, Experts{W1: w1, W2: w2}, counts, MLPOptions{Act: kernels.SiLU, Gated: true})
		if plan != nil {
			yp = plan.Combine(tape, yp)
		}
		y = Unpermute(tape, yp, probs, d)
	}
	w := tensor.FromSlice(randn(uint64(500+r), tokens*h, 1), tokens*h)
	loss := autograd.WeightedSum(tape, autograd.View(tape, y, tokens*h), w)
	if err := autograd.Backward(tape, loss, nil); err != nil {
		return epResult{}, err
	}
	res := epResult{y: y.Value.Data(), dx: x.Grad.Data(), dprobs: probs.Grad.Data(), dw1: map[int][]float32{}, dw2: map[int][]float32{}}
	for j := range n {
		if w1[j].Grad != nil {
			res.dw1[first+j], res.dw2[first+j] = w1[j].Grad.Data(), w2[j].Grad.Data()
		}
	}
	return res, nil
}

// TestDispatchersMatchOneRank runs the all-to-all and the all-gather
// dispatchers on 2 and 4 in-process expert-parallel ranks, each routing its own tokens (with
// and without capacity dropping), and compares every rank's outputs and
// input gradients with the same tokens through all experts on one rank,
// and each expert's weight gradient with the sum over the ranks' one-rank
// gradients: outputs and input gradients to 1e-6, weight gradients to
// 1e-5 (‖g − g₁‖/‖g₁‖; the sum's order differs).
func TestDispatchersMatchOneRank(t *testing.T) {
	const tokens, h, e, f = 12, 8, 8, 6
	for _, dispatcher := range []string{"alltoall", "allgather"} {
		for _, ep := range []int{2, 4} {
			for _, drop := range []bool{false, true} {
				testDispatcher(t, dispatcher, ep, drop, tokens, h, e, f)
			}
		}
	}
}

// testDispatcher runs one dispatcher, EP size and drop setting of
// TestDispatchersMatchOneRank.
func testDispatcher(t *testing.T, dispatcher string, ep int, drop bool, tokens, h, e, f int) {
	t.Run(fmt.Sprintf("%s/ep%d/drop=%v", dispatcher, ep, drop), func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		want := make([]epResult, ep)
		sum1, sum2 := map[int][]float32{}, map[int][]float32{}
		for r := range ep {
			res, err := runExperts(ctx, nil, r, tokens, h, e, f, drop, "")
			if err != nil {
				t.Fatal(err)
			}
			want[r] = res
			for j, g := range res.dw1 {
				sum1[j] = addInto(sum1[j], g)
				sum2[j] = addInto(sum2[j], res.dw2[j])
			}
		}
		got := make([]epResult, ep)
		var mu sync.Mutex
		err := local.NewWorld(ep, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
			res, err := runExperts(ctx, g, g.Rank(), tokens, h, e, f, drop, dispatcher)
			mu.Lock()
			got[g.Rank()] = res
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for r := range ep {
			for _, c := range []struct {
				name      string
				got, want []float32
			}{{"output", got[r].y, want[r].y}, {"input gradient", got[r].dx, want[r].dx}, {"probs gradient", got[r].dprobs, want[r].dprobs}} {
				if d := numtest.RelNorm(c.got, c.want); d > 1e-6 {
					t.Errorf("rank %d %s: ‖Δ‖/‖one rank‖ = %.2g", r, c.name, d)
				}
			}
			for j := r * e / ep; j < (r+1)*e/ep; j++ {
				if _, ok := got[r].dw1[j]; ok != (sum1[j] != nil) {
					t.Errorf("expert %d has a gradient on its rank: %v, on one rank: %v", j, ok, sum1[j] != nil)
				}
			}
			for j, g := range got[r].dw1 {
				if d := numtest.RelNorm(g, sum1[j]); d > 1e-5 {
					t.Errorf("expert %d fc1 gradient: %.2g from the sum of the one-rank gradients", j, d)
				}
				if d := numtest.RelNorm(got[r].dw2[j], sum2[j]); d > 1e-5 {
					t.Errorf("expert %d fc2 gradient: %.2g", j, d)
				}
			}
		}
	})
}

func addInto(dst, src []float32) []float32 {
	if dst == nil {
		dst = make([]float32, len(src))
	}
	for i, v := range src {
		dst[i] += v
	}
	return dst
}
