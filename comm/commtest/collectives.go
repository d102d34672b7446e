package commtest

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
)

// inputs returns every member's input, indexed by group rank and drawn from
// the member's global rank, so different groups carry different data.
func inputs(g comm.Group, dt comm.DType, seed uint64, n int) []comm.Buffer {
	ins := make([]comm.Buffer, g.Size())
	for k, gr := range g.GlobalRanks() {
		ins[k] = gen(dt, seed, gr, n)
	}
	return ins
}

func collectiveCases() []Case {
	return []Case{
		{Name: "AllReduce", Rank: allReduce},
		{Name: "ReduceScatter", Rank: reduceScatter},
		{Name: "ReduceScatterV", Rank: reduceScatterV},
		{Name: "AllGather", Rank: allGather},
		{Name: "AllGatherV", Rank: allGatherV},
		{Name: "Broadcast", Rank: broadcast},
		{Name: "AllToAll", Rank: allToAll},
		{Name: "AllToAllV", Rank: allToAllV},
		{Name: "Barrier", Rank: barrier},
	}
}

// checkAllReduce runs one AllReduce on g and compares it with the serial
// reference.
func checkAllReduce(ctx context.Context, g comm.Group, dt comm.DType, op comm.ReduceOp, seed uint64, n int) error {
	ins := inputs(g, dt, seed, n)
	buf := gen(dt, seed, g.GlobalRanks()[g.Rank()], n)
	if err := g.AllReduce(ctx, buf, op); err != nil {
		return err
	}
	if err := same(fmt.Sprintf("AllReduce(%v, %v) on %q", buf, op, g.Name()), buf, refReduce(op, ins)); err != nil {
		return failf(g, "%v", err)
	}
	return nil
}

func allReduce(ctx context.Context, g comm.Group) error {
	seed := uint64(100)
	for _, dt := range dtypes {
		for _, op := range reduceOps {
			for _, n := range sizes(g.Size()) {
				seed++
				if err := checkAllReduce(ctx, g, dt, op, seed, n); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func reduceScatter(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	seed := uint64(200)
	for _, dt := range dtypes {
		for _, op := range reduceOps {
			for _, c := range []int{0, 1, 5, 1100} {
				seed++
				ins := inputs(g, dt, seed, n*c)
				out := zeros(dt, c)
				if err := g.ReduceScatter(ctx, out, ins[r], op); err != nil {
					return err
				}
				want := refReduce(op, ins).Slice(r*c, (r+1)*c)
				if err := same(fmt.Sprintf("ReduceScatter(%v, %v)", ins[r], op), out, want); err != nil {
					return failf(g, "%v", err)
				}
			}
		}
	}
	return nil
}

// unevenCounts returns Size() counts with zeros and unequal entries.
func unevenCounts(n int, scale int) []int {
	counts := make([]int, n)
	for k := range counts {
		counts[k] = (k*7 + 3) % 5 * scale
	}
	return counts
}

func reduceScatterV(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	seed := uint64(300)
	for _, dt := range dtypes {
		for _, op := range reduceOps {
			for _, scale := range []int{1, 301} {
				seed++
				counts := unevenCounts(n, scale)
				total, off := sum(counts), sum(counts[:r])
				ins := inputs(g, dt, seed, total)
				out := zeros(dt, counts[r])
				if err := g.ReduceScatterV(ctx, out, ins[r], counts, op); err != nil {
					return err
				}
				want := refReduce(op, ins).Slice(off, off+counts[r])
				if err := same(fmt.Sprintf("ReduceScatterV(%v, counts %v, %v)", ins[r], counts, op), out, want); err != nil {
					return failf(g, "%v", err)
				}
			}
		}
	}
	return nil
}

func allGather(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	seed := uint64(400)
	for _, dt := range dtypes {
		for _, c := range []int{0, 1, 5, 1100} {
			seed++
			ins := inputs(g, dt, seed, c)
			out := zeros(dt, n*c)
			if err := g.AllGather(ctx, out, ins[r]); err != nil {
				return err
			}
			if err := same(fmt.Sprintf("AllGather(%v)", ins[r]), out, concat(dt, ins)); err != nil {
				return failf(g, "%v", err)
			}
		}
	}
	return nil
}

func allGatherV(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	seed := uint64(500)
	for _, dt := range dtypes {
		for _, scale := range []int{1, 301} {
			seed++
			counts := unevenCounts(n, scale)
			ins := make([]comm.Buffer, n)
			for k, gr := range g.GlobalRanks() {
				ins[k] = gen(dt, seed, gr, counts[k])
			}
			out := zeros(dt, sum(counts))
			if err := g.AllGatherV(ctx, out, ins[r], counts); err != nil {
				return err
			}
			if err := same(fmt.Sprintf("AllGatherV(%v, counts %v)", ins[r], counts), out, concat(dt, ins)); err != nil {
				return failf(g, "%v", err)
			}
		}
	}
	return nil
}

func broadcast(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	seed := uint64(600)
	for _, dt := range dtypes {
		for root := range n {
			for _, l := range sizes(n) {
				seed++
				want := gen(dt, seed, g.GlobalRanks()[root], l)
				buf := zeros(dt, l)
				if r == root {
					buf = gen(dt, seed, g.GlobalRanks()[root], l)
				}
				if err := g.Broadcast(ctx, buf, root); err != nil {
					return err
				}
				if err := same(fmt.Sprintf("Broadcast(%v, root %d)", buf, root), buf, want); err != nil {
					return failf(g, "%v", err)
				}
			}
		}
	}
	return nil
}

func allToAll(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	seed := uint64(700)
	for _, dt := range dtypes {
		for _, c := range []int{0, 1, 3, 700} {
			seed++
			ins := inputs(g, dt, seed, n*c)
			out := zeros(dt, n*c)
			if err := g.AllToAll(ctx, out, ins[r]); err != nil {
				return err
			}
			pieces := make([]comm.Buffer, n)
			for k := range n {
				pieces[k] = ins[k].Slice(r*c, (r+1)*c)
			}
			if err := same(fmt.Sprintf("AllToAll(%v)", ins[r]), out, concat(dt, pieces)); err != nil {
				return failf(g, "%v", err)
			}
		}
	}
	return nil
}

// splitCount is the number of elements group rank j sends to group rank k
// in the AllToAllV case: uneven, sometimes zero.
func splitCount(j, k, scale int) int { return (j + 2*k + 1) % 4 * scale }

func allToAllV(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	seed := uint64(800)
	for _, dt := range dtypes {
		for _, scale := range []int{1, 257} {
			seed++
			send, recv := make([]int, n), make([]int, n)
			for k := range n {
				send[k], recv[k] = splitCount(r, k, scale), splitCount(k, r, scale)
			}
			ins := make([]comm.Buffer, n)
			for k, gr := range g.GlobalRanks() {
				total := 0
				for j := range n {
					total += splitCount(k, j, scale)
				}
				ins[k] = gen(dt, seed, gr, total)
			}
			out := zeros(dt, sum(recv))
			if err := g.AllToAllV(ctx, out, ins[r], send, recv); err != nil {
				return err
			}
			pieces := make([]comm.Buffer, n)
			for k := range n {
				off := 0
				for j := range r {
					off += splitCount(k, j, scale)
				}
				pieces[k] = ins[k].Slice(off, off+splitCount(k, r, scale))
			}
			if err := same(fmt.Sprintf("AllToAllV(send %v, recv %v)", send, recv), out, concat(dt, pieces)); err != nil {
				return failf(g, "%v", err)
			}
		}
	}
	return nil
}

// barrier checks that barriers interleave with other collectives without
// disturbing their matching.
func barrier(ctx context.Context, g comm.Group) error {
	for i := range 5 {
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		if err := checkAllReduce(ctx, g, comm.Float32, comm.Sum, uint64(900+i), 3); err != nil {
			return err
		}
	}
	return nil
}
