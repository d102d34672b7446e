package local

import (
	"fmt"
	"slices"

	"github.com/gotron/gotron/comm"
)

// args are one party's arguments, published in its meet.
type args struct {
	present bool
	kind    opKind
	a, b    comm.Buffer // buf, or out and in
	rop     comm.ReduceOp
	root    int
	c1, c2  []int // counts, or sendCounts and recvCounts
	name    string
	parts   [][]int
}

// agree checks that every party's arguments match party 0's, the same way on
// every party so all return the same *comm.MismatchError. The caller has
// seen the meet ready.
func (c *call) agree() error {
	as := c.m.args
	a0 := &as[0]
	if c.t.p2p {
		if !sameShape(as[0].a, as[1].a) {
			return c.mismatch("dtype and length", 0, as[0].a.String(), 1, as[1].a.String())
		}
		return nil
	}
	for k := 1; k < len(as); k++ {
		ak := &as[k]
		if ak.kind != a0.kind {
			return c.mismatch("operation", 0, a0.kind.String(), k, ak.kind.String())
		}
		switch a0.kind {
		case opAllReduce, opBroadcast, opAllToAll:
			if !sameShape(a0.a, ak.a) {
				return c.mismatch("dtype and length", 0, a0.a.String(), k, ak.a.String())
			}
		case opReduceScatter, opAllGather:
			if !sameShape(a0.a, ak.a) || !sameShape(a0.b, ak.b) {
				return c.mismatch("dtype and length", 0, a0.a.String()+" out, "+a0.b.String()+" in",
					k, ak.a.String()+" out, "+ak.b.String()+" in")
			}
		case opReduceScatterV, opAllGatherV, opAllToAllV:
			if a0.a.DType() != ak.a.DType() {
				return c.mismatch("dtype", 0, a0.a.DType().String(), k, ak.a.DType().String())
			}
		}
		switch a0.kind {
		case opAllReduce, opReduceScatter, opReduceScatterV:
			if ak.rop != a0.rop {
				return c.mismatch("reduce op", 0, a0.rop.String(), k, ak.rop.String())
			}
		}
		switch a0.kind {
		case opBroadcast:
			if ak.root != a0.root {
				return c.mismatch("root", 0, fmt.Sprint(a0.root), k, fmt.Sprint(ak.root))
			}
		case opReduceScatterV, opAllGatherV:
			if !slices.Equal(ak.c1, a0.c1) {
				return c.mismatch("counts", 0, fmt.Sprint(a0.c1), k, fmt.Sprint(ak.c1))
			}
		case opNewSubgroups:
			if ak.name != a0.name {
				return c.mismatch("name", 0, fmt.Sprintf("%q", a0.name), k, fmt.Sprintf("%q", ak.name))
			}
			if !slices.EqualFunc(ak.parts, a0.parts, slices.Equal) {
				return c.mismatch("partition", 0, fmt.Sprint(a0.parts), k, fmt.Sprint(ak.parts))
			}
		}
	}
	if a0.kind == opAllToAllV {
		for j := range as {
			for k := range as {
				if as[j].c1[k] != as[k].c2[j] {
					return c.mismatch("split sizes", j, fmt.Sprintf("sendCounts[%d] = %d", k, as[j].c1[k]),
						k, fmt.Sprintf("recvCounts[%d] = %d", j, as[k].c2[j]))
				}
			}
		}
	}
	return nil
}

func sameShape(a, b comm.Buffer) bool { return a.DType() == b.DType() && a.Len() == b.Len() }

func (c *call) mismatch(what string, j int, vj string, k int, vk string) error {
	return &comm.MismatchError{Group: c.t.c.name, GlobalRanks: c.t.c.global, Op: c.kind.String(), Seq: c.seq,
		What: what, Rank: c.t.members[j], Mine: vj, Peer: c.t.members[k], PeerOp: c.m.args[k].kind.String(), Theirs: vk}
}

// compute does this party's share of a ready collective.
func (c *call) compute() {
	as := c.m.args
	p, n := c.party, len(as)
	me := &as[p]
	switch c.kind {
	case opAllReduce:
		c.allReduce()
	case opReduceScatter:
		cnt := me.a.Len()
		c.reduceChunk(me.rop, me.a, p*cnt)
	case opReduceScatterV:
		off := 0
		for _, x := range me.c1[:p] {
			off += x
		}
		c.reduceChunk(me.rop, me.a, off)
	case opAllGather:
		cnt := me.b.Len()
		for k := range as {
			me.a.Slice(k*cnt, (k+1)*cnt).CopyFrom(as[k].b)
		}
	case opAllGatherV:
		off := 0
		for k := range as {
			me.a.Slice(off, off+me.c1[k]).CopyFrom(as[k].b)
			off += me.c1[k]
		}
	case opBroadcast:
		if p != me.root {
			me.a.CopyFrom(as[me.root].a)
		}
	case opAllToAll:
		cnt := me.a.Len() / n
		for k := range as {
			me.a.Slice(k*cnt, (k+1)*cnt).CopyFrom(as[k].b.Slice(p*cnt, (p+1)*cnt))
		}
	case opAllToAllV:
		out := 0
		for k := range as {
			in := 0
			for _, x := range as[k].c1[:p] {
				in += x
			}
			cnt := me.c2[k]
			me.a.Slice(out, out+cnt).CopyFrom(as[k].b.Slice(in, in+cnt))
			out += cnt
		}
	case opRecv:
		me.a.CopyFrom(as[0].a)
	}
}

// reduceChunk reduces the elements [off, off+out.Len()) of every party's
// input into out.
func (c *call) reduceChunk(op comm.ReduceOp, out comm.Buffer, off int) {
	as := c.m.args
	n := len(as)
	bufs := c.scratch(n + 1)
	for k := range as {
		bufs[k] = as[k].b.Slice(off, off+out.Len())
	}
	bufs[n] = out
	comm.Reduce(op, bufs[n:], bufs[:n])
}

// scratch returns this party's reusable buffer list of length k.
func (c *call) scratch(k int) []comm.Buffer {
	s := c.m.scratch[c.party]
	if cap(s) < k {
		s = make([]comm.Buffer, k)
		c.m.scratch[c.party] = s
	}
	return s[:k]
}
