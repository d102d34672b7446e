package commtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gotron/gotron/comm"
)

func groupCases() []Case {
	return []Case{
		{Name: "WorldGroup", Rank: worldGroup},
		{Name: "Subgroups", Rank: subgroups},
		{Name: "ConcurrentGroups", Rank: concurrentGroups},
		{Name: "AsyncOverlap", Rank: asyncOverlap},
		{Name: "WaitContext", MinSize: 2, Rank: waitContext},
	}
}

// worldGroup checks the world group's identity.
func worldGroup(ctx context.Context, g comm.Group) error {
	if g.Name() != "world" {
		return failf(g, "Name() = %q, want \"world\"", g.Name())
	}
	if r, n := g.Rank(), g.Size(); r < 0 || r >= n {
		return failf(g, "Rank() = %d out of [0, %d)", r, n)
	}
	for k, gr := range g.GlobalRanks() {
		if gr != k {
			return failf(g, "GlobalRanks() = %v, want 0…%d", g.GlobalRanks(), g.Size()-1)
		}
	}
	if len(g.GlobalRanks()) != g.Size() {
		return failf(g, "len(GlobalRanks()) = %d, want %d", len(g.GlobalRanks()), g.Size())
	}
	return nil
}

// The partitions the group cases split a world of n into, as parent ranks.
func tpPartition(n int) [][]int {
	tp := 1
	if n%2 == 0 {
		tp = 2
	}
	var p [][]int
	for lo := 0; lo < n; lo += tp {
		var sub []int
		for k := lo; k < lo+tp; k++ {
			sub = append(sub, k)
		}
		p = append(p, sub)
	}
	return p
}

// dpPartition is the transpose of tpPartition: strided groups.
func dpPartition(n int) [][]int {
	tp := len(tpPartition(n)[0])
	var p [][]int
	for j := range tp {
		var sub []int
		for k := j; k < n; k += tp {
			sub = append(sub, k)
		}
		p = append(p, sub)
	}
	return p
}

func reversed(n int) [][]int {
	sub := make([]int, n)
	for k := range sub {
		sub[k] = n - 1 - k
	}
	return [][]int{sub}
}

// split makes the subgroups of partition and checks the caller's identity
// in the result.
func split(ctx context.Context, g comm.Group, name string, partition [][]int) (comm.Group, error) {
	sub, err := g.NewSubgroups(ctx, name, partition)
	if err != nil {
		return nil, err
	}
	var want []int
	for _, s := range partition {
		if slices.Contains(s, g.Rank()) {
			want = s
		}
	}
	switch {
	case want == nil && sub != nil:
		return nil, failf(g, "NewSubgroups(%q, %v) returned a group for a rank in none", name, partition)
	case want == nil:
		return nil, nil
	case sub == nil:
		return nil, failf(g, "NewSubgroups(%q, %v) returned nil", name, partition)
	}
	global := make([]int, len(want))
	for k, r := range want {
		global[k] = g.GlobalRanks()[r]
	}
	if sub.Name() != name || sub.Size() != len(want) || !slices.Equal(sub.GlobalRanks(), global) ||
		sub.GlobalRanks()[sub.Rank()] != g.GlobalRanks()[g.Rank()] {
		return nil, failf(g, "NewSubgroups(%q, %v): got name %q, rank %d of %d, global ranks %v; want %q, global ranks %v",
			name, partition, sub.Name(), sub.Rank(), sub.Size(), sub.GlobalRanks(), name, global)
	}
	return sub, nil
}

// subgroups makes several sets of subgroups, nested ones and a partial one,
// and runs collectives on each; results depend on the members' order.
func subgroups(ctx context.Context, g comm.Group) error {
	n := g.Size()
	tp, err := split(ctx, g, "tp", tpPartition(n))
	if err != nil {
		return err
	}
	dp, err := split(ctx, g, "dp", dpPartition(n))
	if err != nil {
		return err
	}
	rev, err := split(ctx, g, "rev", reversed(n))
	if err != nil {
		return err
	}
	var partial comm.Group
	if n > 1 {
		if partial, err = split(ctx, g, "partial", [][]int{identity(n - 1)}); err != nil {
			return err
		}
	}
	single, err := split(ctx, tp, "single", singletons(tp.Size()))
	if err != nil {
		return err
	}
	for i, sub := range []comm.Group{tp, dp, rev, partial, single, g} {
		if sub == nil {
			continue
		}
		if err := checkAllReduce(ctx, sub, comm.Float32, comm.Sum, uint64(40+i), 1001); err != nil {
			return err
		}
		seed := uint64(50 + i)
		ins := inputs(sub, comm.BFloat16, seed, 3)
		out := zeros(comm.BFloat16, 3*sub.Size())
		if err := sub.AllGather(ctx, out, ins[sub.Rank()]); err != nil {
			return err
		}
		if err := same(fmt.Sprintf("AllGather on %q", sub.Name()), out, concat(comm.BFloat16, ins)); err != nil {
			return failf(g, "%v", err)
		}
	}
	return nil
}

func identity(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func singletons(n int) [][]int {
	p := make([][]int, n)
	for i := range p {
		p[i] = []int{i}
	}
	return p
}

// concurrentGroups runs collectives on the tp, dp and world groups at once
// from three goroutines of each rank.
func concurrentGroups(ctx context.Context, g comm.Group) error {
	n := g.Size()
	tp, err := split(ctx, g, "tp", tpPartition(n))
	if err != nil {
		return err
	}
	dp, err := split(ctx, g, "dp", dpPartition(n))
	if err != nil {
		return err
	}
	const rounds = 20
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for j, sub := range []comm.Group{tp, dp, g} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				dt := dtypes[i%len(dtypes)]
				op := reduceOps[i%len(reduceOps)]
				if err := checkAllReduce(ctx, sub, dt, op, uint64(1000*j+i), 257+i); err != nil {
					errs[j] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// asyncOverlap issues several async collectives and messages, runs a
// blocking collective while they are in flight, then waits in reverse
// order.
func asyncOverlap(ctx context.Context, g comm.Group) error {
	n, r := g.Size(), g.Rank()
	me := g.GlobalRanks()[r]
	type pending struct {
		w     comm.Work
		what  string
		got   comm.Buffer
		want  comm.Buffer
		check bool
	}
	var ps []pending
	add := func(what string, w comm.Work, err error, got, want comm.Buffer) error {
		if err != nil {
			return err
		}
		ps = append(ps, pending{w: w, what: what, got: got, want: want, check: true})
		return nil
	}
	for i, dt := range dtypes {
		seed := uint64(60 + i)
		buf := gen(dt, seed, me, 2000+i)
		w, err := g.AllReduceAsync(ctx, buf, comm.Sum)
		if err := add("AllReduceAsync", w, err, buf, refReduce(comm.Sum, inputs(g, dt, seed, 2000+i))); err != nil {
			return err
		}
	}
	{
		ins := inputs(g, comm.Float32, 70, 5*n)
		out := zeros(comm.Float32, 5)
		w, err := g.ReduceScatterAsync(ctx, out, ins[r], comm.Max)
		if err := add("ReduceScatterAsync", w, err, out, refReduce(comm.Max, ins).Slice(5*r, 5*r+5)); err != nil {
			return err
		}
	}
	{
		ins := inputs(g, comm.Int64, 71, 9)
		out := zeros(comm.Int64, 9*n)
		w, err := g.AllGatherAsync(ctx, out, ins[r])
		if err := add("AllGatherAsync", w, err, out, concat(comm.Int64, ins)); err != nil {
			return err
		}
	}
	{
		root := n - 1
		buf := zeros(comm.Float16, 33)
		if r == root {
			buf = gen(comm.Float16, 72, g.GlobalRanks()[root], 33)
		}
		w, err := g.BroadcastAsync(ctx, buf, root)
		if err := add("BroadcastAsync", w, err, buf, gen(comm.Float16, 72, g.GlobalRanks()[root], 33)); err != nil {
			return err
		}
	}
	if n > 1 {
		next, prev := (r+1)%n, (r+n-1)%n
		buf := recvInto(73, g.GlobalRanks()[prev], me, 3)
		w, err := g.RecvAsync(ctx, buf, prev)
		if err := add("RecvAsync", w, err, buf, message(73, g.GlobalRanks()[prev], me, 3)); err != nil {
			return err
		}
		w, err = g.SendAsync(ctx, message(73, me, g.GlobalRanks()[next], 3), next)
		if err != nil {
			return err
		}
		ps = append(ps, pending{w: w, what: "SendAsync"})
	}
	if err := checkAllReduce(ctx, g, comm.Float32, comm.Min, 74, 100); err != nil {
		return err
	}
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		if err := p.w.Wait(ctx); err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
		if !p.check {
			continue
		}
		if err := same(p.what, p.got, p.want); err != nil {
			return failf(g, "%v", err)
		}
	}
	return nil
}

// waitContext: a Wait whose own context ends before the operation can
// complete returns the context's error, and the operation goes on: rank 1
// joins only after a message rank 0 sends once that Wait has returned.
func waitContext(ctx context.Context, g comm.Group) error {
	r := g.Rank()
	const seed, n = 75, 9
	buf := gen(comm.Float32, seed, g.GlobalRanks()[r], n)
	want := refReduce(comm.Sum, inputs(g, comm.Float32, seed, n))
	token := comm.I64(make([]int64, 1))
	switch r {
	case 0:
		w, err := g.AllReduceAsync(ctx, buf, comm.Sum)
		if err != nil {
			return err
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := w.Wait(done); !errors.Is(err, context.Canceled) {
			return failf(g, "Wait with a cancelled context before rank 1 joined returned %v, want context.Canceled", err)
		}
		if err := g.Send(ctx, token, 1); err != nil {
			return err
		}
		if err := w.Wait(ctx); err != nil {
			return err
		}
	case 1:
		if err := g.Recv(ctx, token, 0); err != nil {
			return err
		}
		fallthrough
	default:
		if err := g.AllReduce(ctx, buf, comm.Sum); err != nil {
			return err
		}
	}
	if err := same("AllReduce after an early Wait", buf, want); err != nil {
		return failf(g, "%v", err)
	}
	return nil
}
