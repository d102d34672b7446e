package dp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
)

// recGroup records the gradient collectives issued on a group.
type recGroup struct {
	comm.Group
	mu  *sync.Mutex
	log *[]string
}

func (g recGroup) note(s string) {
	g.mu.Lock()
	*g.log = append(*g.log, s)
	g.mu.Unlock()
}

func (g recGroup) AllReduceAsync(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	g.note("reduce")
	return g.Group.AllReduceAsync(ctx, buf, op)
}

func (g recGroup) ReduceScatterAsync(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	g.note("reduce")
	return g.Group.ReduceScatterAsync(ctx, out, in, op)
}

// TestReductionsStartDuringBackward is the order-of-events test of
// overlap_grad_reduce on 2 ranks, 4 micro-batches each: no reduction is
// issued under NoSync; in the first iteration none starts before
// FinishGradSync (the counts are being learnt); in the second, every
// bucket's reduction is issued from the grad hooks before the word
// embedding — the first registered parameter, whose gradient backward
// completes last — has its gradient, that is before the backward pass's
// last GEMM, and FinishGradSync issues none.
func TestReductionsStartDuringBackward(t *testing.T) {
	for _, distopt := range []bool{false, true} {
		t.Run(fmt.Sprintf("distopt=%v", distopt), func(t *testing.T) {
			cfg := config.DefaultDDPConfig()
			cfg.OverlapGradReduce, cfg.UseDistributedOptimizer = true, distopt
			err := local.NewWorld(2, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				var mu sync.Mutex
				var log []string
				m, _ := newToy(3)
				d := wrap(t, ctx, m, cfg, Options{Group: recGroup{g, &mu, &log}, BucketSize: 600})
				nb := len(d.Buffer.Buckets)
				if nb < 3 {
					return fmt.Errorf("%d buckets; the test wants several", nb)
				}
				m.WordEmbeddings.AddGradHook(func(context.Context, *autograd.Var) {
					mu.Lock()
					log = append(log, "embedding-grad")
					mu.Unlock()
				})
				for it := 1; it <= 2; it++ {
					mu.Lock()
					log = nil
					mu.Unlock()
					d.ZeroGradBuffer()
					accumulate(t, autograd.NewTape(ctx), m, d, 4*g.Rank(), 4, 4)
					mu.Lock()
					during := append([]string(nil), log...)
					mu.Unlock()
					if err := d.FinishGradSync(ctx, false); err != nil {
						return err
					}
					if got := strings.Join(during, ","); it == 1 && strings.Contains(got, "reduce") {
						t.Errorf("rank %d iteration 1: reductions issued during backward: %s", g.Rank(), got)
					}
					if it == 2 {
						// Micro-batches 1–3 (under NoSync) give embedding
						// gradients and no reduction; in the 4th, the other
						// buckets reduce before the embedding's gradient is
						// complete, and its own bucket's reduction is issued
						// by the DDP's hook on it, which runs before this
						// test's (registered later).
						want := strings.Repeat("embedding-grad,", 4-1) + strings.Repeat("reduce,", nb) + "embedding-grad"
						if got := strings.Join(during, ","); got != want {
							t.Errorf("rank %d iteration 2: events %s, want %s", g.Rank(), got, want)
						}
						if n := strings.Count(strings.Join(log, ","), "reduce"); n != nb {
							t.Errorf("rank %d iteration 2: %d reductions in all, want %d (one per bucket)", g.Rank(), n, nb)
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNaNGradientStopsEveryRank: a NaN in rank 1's local gradient of one
// parameter, with check_for_nan_in_grad, makes every rank's
// FinishGradSync return the same GradError naming the parameter, its
// bucket and rank 1 — with and without overlap, with and without the
// distributed optimizer, and across two optimizer instances; an infinity
// is named as such.
func TestNaNGradientStopsEveryRank(t *testing.T) {
	for _, tc := range []struct {
		overlap, distopt bool
		bad              float32
		word             string
		ranks, instances int
		who              string
	}{
		{false, false, float32(math.NaN()), "NaN", 3, 1, "data-parallel rank 1 (world rank 1)"},
		{true, true, float32(math.Inf(1)), "infinite", 3, 1, "data-parallel rank 1 (world rank 1)"},
		{true, false, float32(math.NaN()), "NaN", 3, 1, "data-parallel rank 1 (world rank 1)"},
		{true, true, float32(math.NaN()), "NaN", 4, 2, "world rank 1 (optimizer instance 0)"},
	} {
		cfg := config.DefaultDDPConfig()
		cfg.OverlapGradReduce, cfg.UseDistributedOptimizer, cfg.CheckForNaNInGrad = tc.overlap, tc.distopt, true
		cfg.NumDistributedOptimizerInstances = tc.instances
		const victim = "fc1.weight"
		// The NaN goes in before the gradients are complete: through a
		// grad hook on the victim, which runs before the DDP's own
		// (hooks run in order of registration, and the victim's is
		// added first here).
		err := local.NewWorld(tc.ranks, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
			intra, inter, err := groupsFor(ctx, g, tc.instances)
			if err != nil {
				return err
			}
			m, _ := newToy(3)
			p := m.Parameter(victim)
			poisoned := false
			p.AddGradHook(func(context.Context, *autograd.Var) {
				if g.Rank() == 1 && poisoned {
					p.Grad.Data()[5] = tc.bad
				}
			})
			d := wrap(t, ctx, m, cfg, Options{Group: intra, Inter: inter, BucketSize: 800})
			var last error
			for it := 0; it < 2; it++ {
				poisoned = it == 1
				d.ZeroGradBuffer()
				accumulate(t, autograd.NewTape(ctx), m, d, g.Rank(), 1, 1)
				last = d.FinishGradSync(ctx, false)
			}
			var ge *GradError
			if !errors.As(last, &ge) {
				return fmt.Errorf("rank %d: %v, want a GradError", g.Rank(), last)
			}
			r, _ := d.Buffer.Range(p)
			for _, want := range []string{victim, fmt.Sprintf("bucket %d", r.Bucket), tc.who, tc.word} {
				if !strings.Contains(ge.Msg, want) {
					t.Errorf("rank %d: %q does not name %q", g.Rank(), ge.Msg, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestForceAllReduceAfterHooksScattered: under the distributed optimizer
// with overlap, the second iteration's hooks launch reduce-scatters; a
// finalize that then asks for force_all_reduce must still put every
// rank's reduced shard in place (the wait follows the reduction that was
// launched), so the gathered gradients equal one rank's.
func TestForceAllReduceAfterHooksScattered(t *testing.T) {
	want := serialGrads(t)
	cfg := config.DefaultDDPConfig()
	cfg.UseDistributedOptimizer, cfg.OverlapGradReduce = true, true
	err := local.NewWorld(2, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		m, _ := newToy(3)
		d := wrap(t, ctx, m, cfg, Options{Group: g, BucketSize: 700})
		for it := 0; it < 2; it++ {
			d.ZeroGradBuffer()
			accumulate(t, autograd.NewTape(ctx), m, d, 4*g.Rank(), 4, 4)
			if err := FinalizeModelGrads(ctx, []Wrapper{d}, FinalizeOptions{ForceAllReduce: it == 1}); err != nil {
				return err
			}
		}
		if err := d.AllGatherGrads(ctx); err != nil {
			return err
		}
		for _, p := range m.Parameters() {
			if e := rel(p.Grad.Data(), want[p.Name]); e > 1e-6 {
				t.Errorf("rank %d: %s differs from one rank by %.3g", g.Rank(), p.Name, e)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
