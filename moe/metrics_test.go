package moe

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
)

// TestTallyReduce: the reduction of hand-made statistics on 1 and 3
// in-process ranks. Two MoE layers (global indices 1 and 3) of 3 experts;
// rank r holds layer 1 with losses 1+r and 10+r and tokens (r, 2r, 3) and,
// except rank 2 (a stage without it), layer 3 with 0.5 and 0.25 and tokens
// (1, 0, 0). Rank 0 gets the sums divided by the divisors; the others nil.
func TestTallyReduce(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			div := Divisors{LoadBalancing: 4, Z: 8}
			var got *Metrics
			err := local.NewWorld(n, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				r := g.Rank()
				s := NewTally([]int{1, 3}, 3)
				if err := s.Add(1, Stats{LoadBalancing: float64(1 + r), Z: float64(10 + r), Passes: 2, Tokens: []float32{float32(r), float32(2 * r), 3}}); err != nil {
					return err
				}
				if r != 2 {
					if err := s.Add(3, Stats{LoadBalancing: 0.5, Z: 0.25, Passes: 2, Tokens: []float32{1, 0, 0}}); err != nil {
						return err
					}
				}
				rec, err := s.Reduce(ctx, g, div, "seq_load_balancing_loss", true)
				if err != nil {
					return err
				}
				if r == 0 {
					got = rec
				} else if rec != nil {
					return fmt.Errorf("rank %d got metrics %+v, want nil (rank 0 logs)", r, rec)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := &Metrics{Layers: []int{1, 3}}
			var lb1, z1 float64
			var tok1 []int64 = []int64{0, 0, 3 * int64(n)}
			for r := range n {
				lb1 += float64(1 + r)
				z1 += float64(10 + r)
				tok1[0] += int64(r)
				tok1[1] += int64(2 * r)
			}
			held := float64(min(n, 2))
			want.SeqLoadBalancingLoss = []float64{lb1 / 4, 0.5 * held / 4}
			want.ZLoss = []float64{z1 / 8, 0.25 * held / 8}
			want.TokensPerExpert = [][]int64{tok1, {int64(held), 0, 0}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("metrics %+v, want %+v", got, want)
			}
		})
	}
}

// TestTallyAddRefuses: statistics of a layer the config does not make
// MoE, or of another number of experts, are refused.
func TestTallyAddRefuses(t *testing.T) {
	s := NewTally([]int{0, 2}, 4)
	if err := s.Add(1, Stats{}); err == nil || !strings.Contains(err.Error(), "decoder layer 1") {
		t.Errorf("layer 1: %v, want an error naming decoder layer 1", err)
	}
	if err := s.Add(2, Stats{Tokens: make([]float32, 3)}); err == nil || !strings.Contains(err.Error(), "the model has 4") {
		t.Errorf("3 experts: %v, want an error naming the model's 4", err)
	}
}

// TestLoggedLosses: the losses a MoE model logs follow the balancing
// type and the coefficients.
func TestLoggedLosses(t *testing.T) {
	for _, c := range []struct {
		typ       string
		aux, z    float64
		wantLB    string
		wantZLoss bool
	}{
		{"aux_loss", 0.01, 0.001, "load_balancing_loss", true},
		{"seq_aux_loss", 0.01, 0, "seq_load_balancing_loss", false},
		{"none", 0.01, 0.001, "", true},
		{"aux_loss", 0, 0, "", false},
	} {
		if lb, z := LoggedLosses(c.typ, c.aux, c.z); lb != c.wantLB || z != c.wantZLoss {
			t.Errorf("%s, aux %g, z %g: names %q, %v; want %q, %v", c.typ, c.aux, c.z, lb, z, c.wantLB, c.wantZLoss)
		}
	}
}

// TestMetricsMeans: the means over the layers, in Megatron's order, only
// of the losses logged.
func TestMetricsMeans(t *testing.T) {
	m := &Metrics{SeqLoadBalancingLoss: []float64{1, 2}, ZLoss: []float64{0.5, 0.25, 0.75}}
	got := m.Means()
	want := []Mean{{"seq_load_balancing_loss", 1.5}, {"z_loss", 0.5}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Means = %v, want %v", got, want)
	}
}

// TestNewDivisors: the load-balancing losses divide by dp·microbatches,
// the z losses by tp·cp·dp·microbatches; sizes below 1 count as 1.
func TestNewDivisors(t *testing.T) {
	if d := NewDivisors(2, 4, 2, 3); d != (Divisors{LoadBalancing: 8, Z: 48}) {
		t.Errorf("NewDivisors(dp 2, micro 4, tp 2, cp 3) = %+v, want {8 48}", d)
	}
	if d := NewDivisors(1, 0, 0, 0); d != (Divisors{LoadBalancing: 1, Z: 1}) {
		t.Errorf("NewDivisors(1, 0, 0, 0) = %+v, want {1 1}", d)
	}
}
