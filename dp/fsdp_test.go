package dp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// fsdpConfig is Megatron-FSDP with strategy, finalized.
func fsdpConfig(strategy string) config.DDPConfig {
	c := config.DefaultDDPConfig()
	c.UseMegatronFSDP, c.DataParallelShardingStrategy = true, strategy
	c.Finalize()
	return c
}

// toyUnits are the toy's FSDP units: fc1 (weight and bias) and fc2; the
// embedding is in no unit.
func toyUnits(m *toyModel) [][]*nn.Parameter {
	return [][]*nn.Parameter{{m.params[1], m.params[2]}, {m.params[3]}}
}

// hookedLoss is the toy's loss with a wrapper's hooks around each part
// (embedding, fc1, fc2), as a GPT's forward pass calls them; check runs
// inside each part, after its pre-hook.
func (m *toyModel) hookedLoss(ctx context.Context, tape *autograd.Tape, w Wrapper, row int, scale float32, check func(part int)) (*autograd.Var, error) {
	x := tensor.New(1, 32)
	for i, d := 0, x.Data(); i < len(d); i++ {
		d[i] = float32(math.Cos(float64(3*row + i)))
	}
	p := m.params
	parts := [][]*nn.Parameter{{p[0]}, {p[1], p[2]}, {p[3]}}
	h := autograd.Const(x)
	for k, ps := range parts {
		if err := w.ParamPreHook(ctx, ps); err != nil {
			return nil, err
		}
		if check != nil {
			check(k)
		}
		switch k {
		case 0:
			h = nn.GELU(tape, nn.Linear(tape, h, p[0].Var, nil))
		case 1:
			h = nn.GELU(tape, nn.Linear(tape, h, p[1].Var, p[2].Var))
		case 2:
			h = nn.Linear(tape, h, p[3].Var, nil)
		}
		h = w.ParamPostHook(ctx, tape, ps, h)
	}
	return autograd.Scale(tape, autograd.Sum(tape, h), scale), tape.Err()
}

// TestFSDPMatchesSerial: under optim_grads and optim_grads_params on 2
// and 4 ranks, 8 rows in micro-batches of one row, the gradients gathered
// from the shards equal one rank's to 1e-6; between micro-batches no
// parameter holds a whole gradient, and under optim_grads_params the
// units' parameters are released outside the parts using them (the
// embedding, in no unit, stays whole); the optimizer's pieces cover every
// element once over the ranks.
func TestFSDPMatchesSerial(t *testing.T) {
	want := serialGrads(t)
	for _, strategy := range []string{config.ShardOptimGrads, config.ShardOptimGradsParams} {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/dp%d", strategy, n), func(t *testing.T) {
				var mu sync.Mutex
				covered := map[string][]int{}
				err := local.NewWorld(n, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
					m, _ := newToy(3)
					f, err := NewFSDP(m.RegisteredParameters(), fsdpConfig(strategy), FSDPOptions{Group: g, Units: toyUnits(m)})
					if err != nil {
						return err
					}
					zero3 := strategy == config.ShardOptimGradsParams
					var bad []string
					check := func(part int) {
						for k, p := range m.params {
							inPart := []int{0, 1, 1, 2}[k] == part
							if released := p.Value.Released(); released != (zero3 && k > 0 && !inPart) {
								bad = append(bad, fmt.Sprintf("part %d: %s released = %v", part, p.Name, released))
							}
						}
					}
					f.ZeroGradBuffer()
					micro := rowsTotal / n
					tape := autograd.NewTape(ctx)
					for k := 0; k < micro; k++ {
						loss, err := m.hookedLoss(ctx, tape, f, g.Rank()*micro+k, 1/float32(micro), check)
						if err != nil {
							return err
						}
						if err := autograd.Backward(tape, loss, nil); err != nil {
							return err
						}
						if err := f.FinishGradSync(ctx, false); err != nil && k == micro-1 {
							return err
						}
						for _, p := range m.params {
							if p.Grad != nil {
								bad = append(bad, fmt.Sprintf("after micro-batch %d: %s holds a whole gradient", k, p.Name))
							}
						}
					}
					if len(bad) > 0 {
						return errors.New(strings.Join(bad, "; "))
					}
					pieces, err := f.OptimizerShards()
					if err != nil {
						return err
					}
					mu.Lock()
					for _, sp := range pieces {
						for i := sp.Offset; i < sp.Offset+sp.Len; i++ {
							covered[sp.Param.Name] = append(covered[sp.Param.Name], i)
						}
					}
					mu.Unlock()
					if err := f.AllGatherGrads(ctx); err != nil {
						return err
					}
					for _, p := range m.params {
						if e := relDiff(p.Grad.Data(), want[p.Name]); e > 1e-6 {
							return fmt.Errorf("rank %d: %s differs from one rank's gradient by %.2g", g.Rank(), p.Name, e)
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				m, _ := newToy(3)
				for _, p := range m.params {
					got := covered[p.Name]
					slices.Sort(got)
					if len(got) != p.Value.Len() || got[0] != 0 || got[len(got)-1] != p.Value.Len()-1 || len(slices.Compact(got)) != p.Value.Len() {
						t.Errorf("%s: the ranks' optimizer pieces cover %d elements, want each of %d once", p.Name, len(got), p.Value.Len())
					}
				}
			})
		}
	}
}

// relDiff is ‖a − b‖/‖b‖.
func relDiff(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		d += float64(a[i]-b[i]) * float64(a[i]-b[i])
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

// TestFSDPParamSync: an update of the shards (as the optimizer writes
// them) reaches the parameters: at once for the parameters that stay
// whole (StartParamSync), at the next gather for a released unit.
func TestFSDPParamSync(t *testing.T) {
	err := local.NewWorld(2, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		m, _ := newToy(3)
		before := map[string][]float32{}
		for _, p := range m.params {
			before[p.Name] = append([]float32(nil), p.Value.Data()...)
		}
		f, err := NewFSDP(m.RegisteredParameters(), fsdpConfig(config.ShardOptimGradsParams), FSDPOptions{Group: g, Units: toyUnits(m)})
		if err != nil {
			return err
		}
		pieces, _ := f.OptimizerShards()
		for _, sp := range pieces {
			for i, x := range sp.Model.Float32s() {
				sp.Model.Float32s()[i] = x + 1
			}
		}
		if err := f.ParamsUpdated(ctx); err != nil {
			return err
		}
		for _, p := range m.params {
			if err := f.ParamPreHook(ctx, []*nn.Parameter{p}); err != nil {
				return err
			}
			for i, x := range p.Value.Data() {
				if x != before[p.Name][i]+1 {
					return fmt.Errorf("rank %d: %s[%d] = %v after the update, want %v", g.Rank(), p.Name, i, x, before[p.Name][i]+1)
				}
			}
			f.ParamPostHook(ctx, autograd.NewTape(ctx), []*nn.Parameter{p}, autograd.Const(tensor.New(1)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFSDPOrder is the order-of-events test of ZeRO-3 on 2 ranks: in the
// forward pass the first unit's gather is prefetched by the embedding's
// part and each unit's by the part before it; in backward, fc2's part
// gathers its unit again and prefetches fc1's before its own backward,
// fc2's reduce-scatter is issued before fc1's gradient exists (the
// reductions overlap backward), and the embedding's part, at the end,
// prefetches nothing.
func TestFSDPOrder(t *testing.T) {
	err := local.NewWorld(2, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		var mu sync.Mutex
		var log []string
		note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
		m, _ := newToy(3)
		f, err := NewFSDP(m.RegisteredParameters(), fsdpConfig(config.ShardOptimGradsParams),
			FSDPOptions{Group: fsdpRec{Group: g, note: note}, Units: toyUnits(m)})
		if err != nil {
			return err
		}
		m.params[1].AddGradHook(func(context.Context, *autograd.Var) { note("fc1-grad") })
		if err := m.notedPass(ctx, f, g.Rank(), note); err != nil {
			return err
		}
		if err := f.FinishGradSync(ctx, false); err != nil {
			return err
		}
		got := strings.Join(log, " ")
		want := "gather-0 part0 gather-1 part1 part2 backward gather-1 gather-0 reduce-1 fc1-grad reduce-0 reduce-2"
		if got != want {
			return fmt.Errorf("rank %d: events\n  %s\nwant\n  %s", g.Rank(), got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFSDPOrderEveryPass: the prefetch follows each pass the same way
// (it reads where a part stands, not what the last pass left), for a
// chunk with the embedding and for one without (a middle pipeline stage):
// three passes of forward and backward issue the same events each.
func TestFSDPOrderEveryPass(t *testing.T) {
	for _, middle := range []bool{false, true} {
		err := local.NewWorld(2, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
			var mu sync.Mutex
			var log []string
			note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
			m, _ := newToy(3)
			ps := m.RegisteredParameters()
			if middle {
				ps = ps[1:]
			}
			f, err := NewFSDP(ps, fsdpConfig(config.ShardOptimGradsParams), FSDPOptions{Group: fsdpRec{Group: g, note: note}, Units: toyUnits(m)})
			if err != nil {
				return err
			}
			var passes []string
			for pass := 0; pass < 3; pass++ {
				mu.Lock()
				log = nil
				mu.Unlock()
				if err := m.notedPass(ctx, f, g.Rank(), note); err != nil {
					return err
				}
				passes = append(passes, strings.Join(log, " "))
			}
			for k, p := range passes[1:] {
				if p != passes[0] {
					return fmt.Errorf("middle=%v: pass %d issues\n  %s\nthe first pass\n  %s", middle, k+1, p, passes[0])
				}
			}
			return f.FinishGradSync(ctx, false)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestFSDPNaNAgreedAcrossInstances: under hybrid sharding (two instances
// of two ranks) a NaN gradient on one rank stops all four with a
// GradError, the ranks of the other instance included.
func TestFSDPNaNAgreedAcrossInstances(t *testing.T) {
	var mu sync.Mutex
	got := map[int]error{}
	err := local.NewWorld(4, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, w comm.Group) error {
		inner, outer, err := hybridGroups(ctx, w)
		if err != nil {
			return err
		}
		cfg := fsdpConfig(config.ShardOptimGradsParams)
		cfg.NumDistributedOptimizerInstances, cfg.CheckForNaNInGrad = 2, true
		m, _ := newToy(3)
		f, err := NewFSDP(m.RegisteredParameters(), cfg, FSDPOptions{Group: inner, Outer: outer, Units: toyUnits(m)})
		if err != nil {
			return err
		}
		scale := float32(1)
		if w.Rank() == 0 {
			scale = float32(math.NaN())
		}
		tape := autograd.NewTape(ctx)
		loss, err := m.hookedLoss(ctx, tape, f, w.Rank(), scale, nil)
		if err != nil {
			return err
		}
		if err := autograd.Backward(tape, loss, nil); err != nil {
			return err
		}
		ferr := f.FinishGradSync(ctx, false)
		mu.Lock()
		got[w.Rank()] = ferr
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 4; r++ {
		var ge *GradError
		if !errors.As(got[r], &ge) {
			t.Errorf("rank %d: FinishGradSync = %v, want a GradError", r, got[r])
		}
	}
	if msg := fmt.Sprint(got[0]); !strings.Contains(msg, "rank(s) 0") {
		t.Errorf("rank 0's error %q does not name world rank 0", msg)
	}
	if msg := fmt.Sprint(got[2]); !strings.Contains(msg, "another instance") {
		t.Errorf("rank 2's error %q does not say the NaN was in another instance", msg)
	}
}

// TestFSDPBroadcastParams: under ZeRO-2 with hybrid sharding (two
// instances of two), ranks that start from different weights hold rank
// 0's after BroadcastParams, in their whole parameters and their shards;
// under ZeRO-3, where rank 0 keeps only its shard, it refuses.
func TestFSDPBroadcastParams(t *testing.T) {
	want, _ := newToy(3)
	for _, strategy := range []string{config.ShardOptimGrads, config.ShardOptimGradsParams} {
		err := local.NewWorld(4, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, w comm.Group) error {
			inner, outer, err := hybridGroups(ctx, w)
			if err != nil {
				return err
			}
			cfg := fsdpConfig(strategy)
			cfg.NumDistributedOptimizerInstances = 2
			m, _ := newToy(uint64(3 + w.Rank()))
			f, err := NewFSDP(m.RegisteredParameters(), cfg, FSDPOptions{Group: inner, Outer: outer, Units: toyUnits(m)})
			if err != nil {
				return err
			}
			err = f.BroadcastParams(ctx)
			if strategy == config.ShardOptimGradsParams {
				if err == nil || !strings.Contains(err.Error(), "before wrapping") {
					return fmt.Errorf("rank %d: ZeRO-3 broadcast returned %v, want the refusal", w.Rank(), err)
				}
				return nil
			}
			if err != nil {
				return err
			}
			pieces, _ := f.OptimizerShards()
			for k, p := range m.params {
				if !slices.Equal(p.Value.Data(), want.params[k].Value.Data()) {
					return fmt.Errorf("rank %d: %s differs from rank 0's after the broadcast", w.Rank(), p.Name)
				}
			}
			for _, sp := range pieces {
				if !slices.Equal(sp.Model.Float32s(), sp.Param.Value.Data()[sp.Offset:sp.Offset+sp.Len]) {
					return fmt.Errorf("rank %d: the shard of %s is not the broadcast value", w.Rank(), sp.Param.Name)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", strategy, err)
		}
	}
}

// notedPass runs one forward and backward pass of row through w's hooks,
// noting each part as it runs ("partK") and the start of backward.
func (m *toyModel) notedPass(ctx context.Context, w Wrapper, row int, note func(string)) error {
	tape := autograd.NewTape(ctx)
	loss, err := m.hookedLoss(ctx, tape, w, row, 1, func(part int) { note(fmt.Sprintf("part%d", part)) })
	if err != nil {
		return err
	}
	note("backward")
	return autograd.Backward(tape, loss, nil)
}

// hybridGroups splits a world of 4 into two instances of two ranks
// (inner: {0, 1}, {2, 3}) and the groups across them (outer: {0, 2},
// {1, 3}).
func hybridGroups(ctx context.Context, w comm.Group) (inner, outer comm.Group, err error) {
	if inner, err = w.NewSubgroups(ctx, "intra", [][]int{{0, 1}, {2, 3}}); err != nil {
		return nil, nil, err
	}
	outer, err = w.NewSubgroups(ctx, "inter", [][]int{{0, 2}, {1, 3}})
	return inner, outer, err
}

// fsdpRec records the gathers and reduce-scatters issued, named by the
// size of the unit (the toy's units differ in size).
type fsdpRec struct {
	comm.Group
	note func(string)
}

func (g fsdpRec) AllGatherAsync(ctx context.Context, out, in comm.Buffer) (comm.Work, error) {
	g.note(fmt.Sprintf("gather-%d", unitBySize(out.Len())))
	return g.Group.AllGatherAsync(ctx, out, in)
}

func (g fsdpRec) ReduceScatterAsync(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	g.note(fmt.Sprintf("reduce-%d", unitBySize(in.Len())))
	return g.Group.ReduceScatterAsync(ctx, out, in, op)
}

// unitBySize names the toy's unit of a padded size: 0 fc1, 1 fc2, 2 the
// embedding.
func unitBySize(n int) int {
	switch {
	case n >= 40*48 && n < 40*48+200:
		return 0
	case n >= 16*40 && n < 16*40+200:
		return 1
	}
	return 2
}
