//go:build mpi

package mpi

import (
	"encoding/json"
	"fmt"
	"unsafe"

	"github.com/gotron/gotron/comm"
)

// Every collective starts with a header exchange: each member contributes
// eight int64s describing its call (an MPI_Iallgather on hdr), and every
// member checks everyone's header against member 0's, in the same order, so
// all members return the same *comm.MismatchError when their arguments
// disagree, before any data moves. MPI itself would corrupt memory, fail
// with MPI_ERR_TRUNCATE or hang on such programs. The exchange also makes
// arrival explicit: once it completes, every member has issued the call.
//
// Counts, names and partitions travel as hashes; only when the hashes
// disagree (an error path) do the members swap the values themselves to
// print them.

const hdrLen = 8

// header is one member's description of a collective call.
type header [hdrLen]int64

// The header's fields.
const (
	hKind  = iota // opKind
	hDType        // comm.DType of the buffers
	hLenA         // length of the first buffer (buf or out)
	hLenB         // length of the second (in)
	hROp          // comm.ReduceOp
	hRoot         // Broadcast's root
	hHash1        // counts, sendCounts, or NewSubgroups' name
	hHash2        // recvCounts, or NewSubgroups' partition
)

// opKind numbers the collectives in headers.
type opKind int64

const (
	kAllReduce opKind = iota + 1
	kReduceScatter
	kReduceScatterV
	kAllGather
	kAllGatherV
	kBroadcast
	kAllToAll
	kAllToAllV
	kBarrier
	kNewSubgroups
	kNativeAllReduce // MPI_Iallreduce itself, for benchmarks
)

func kindName(k int64) string {
	switch opKind(k) {
	case kAllReduce, kNativeAllReduce:
		return comm.OpAllReduce
	case kReduceScatter:
		return comm.OpReduceScatter
	case kReduceScatterV:
		return comm.OpReduceScatterV
	case kAllGather:
		return comm.OpAllGather
	case kAllGatherV:
		return comm.OpAllGatherV
	case kBroadcast:
		return comm.OpBroadcast
	case kAllToAll:
		return comm.OpAllToAll
	case kAllToAllV:
		return comm.OpAllToAllV
	case kBarrier:
		return comm.OpBarrier
	case kNewSubgroups:
		return comm.OpNewSubgroups
	}
	return fmt.Sprintf("opKind(%d)", k)
}

// detail holds the arguments that headers carry as hashes.
type detail struct {
	Counts []int   `json:"c,omitempty"`
	Send   []int   `json:"s,omitempty"`
	Recv   []int   `json:"r,omitempty"`
	Name   string  `json:"n,omitempty"`
	Parts  [][]int `json:"p,omitempty"`
}

// mix is splitmix64's finaliser of a, b, c.
func mix(a, b, c uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 ^ (b+1)*0xbf58476d1ce4e5b9 ^ (c+7)*0x94d049bb133111eb
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func hashInts(xs []int) uint64 {
	h := uint64(len(xs))
	for i, x := range xs {
		h = mix(h, uint64(i), uint64(x))
	}
	return h
}

func hashString(s string) uint64 {
	h := uint64(len(s))
	for i := range len(s) {
		h = mix(h, uint64(i), uint64(s[i]))
	}
	return h
}

func hashPartition(p [][]int) uint64 {
	h := uint64(len(p))
	for i, sub := range p {
		h = mix(h, uint64(i), hashInts(sub))
	}
	return h
}

// splitHashes returns rank j's share of the AllToAllV consistency check:
// Σ_k mix(j, k, send[k]) and Σ_i mix(i, j, recv[i]). Rank j's sendCounts[k]
// must equal rank k's recvCounts[j], so the members' first sums add up to
// the same total as their second sums exactly when the split sizes agree
// (up to a 2⁻⁶⁴ chance of a collision).
func splitHashes(j int, send, recv []int) (hs, hr uint64) {
	for k, n := range send {
		hs += mix(uint64(j), uint64(k), uint64(n))
	}
	for i, n := range recv {
		hr += mix(uint64(i), uint64(j), uint64(n))
	}
	return hs, hr
}

func shape(h header, f int) string {
	return fmt.Sprintf("%v[%d]", comm.DType(h[hDType]), h[f])
}

// agree checks every member's header against member 0's.
func (c *call) agree() error {
	n := len(c.g.global)
	hd := func(k int) (h header) {
		copy(h[:], c.hdrs[k*hdrLen:])
		return h
	}
	h0 := hd(0)
	kind := opKind(h0[hKind])
	var sumS, sumR uint64
	for k := range n {
		hk := hd(k)
		sumS += uint64(hk[hHash1])
		sumR += uint64(hk[hHash2])
		if k == 0 {
			continue
		}
		if hk[hKind] != h0[hKind] {
			return c.mismatch("operation", 0, kindName(h0[hKind]), k, kindName(hk[hKind]), hk)
		}
		switch kind {
		case kAllReduce, kNativeAllReduce, kBroadcast, kAllToAll:
			if hk[hDType] != h0[hDType] || hk[hLenA] != h0[hLenA] {
				return c.mismatch("dtype and length", 0, shape(h0, hLenA), k, shape(hk, hLenA), hk)
			}
		case kReduceScatter, kAllGather:
			if hk[hDType] != h0[hDType] || hk[hLenA] != h0[hLenA] || hk[hLenB] != h0[hLenB] {
				return c.mismatch("dtype and length", 0, shape(h0, hLenA)+" out, "+shape(h0, hLenB)+" in",
					k, shape(hk, hLenA)+" out, "+shape(hk, hLenB)+" in", hk)
			}
		case kReduceScatterV, kAllGatherV, kAllToAllV:
			if hk[hDType] != h0[hDType] {
				return c.mismatch("dtype", 0, comm.DType(h0[hDType]).String(), k, comm.DType(hk[hDType]).String(), hk)
			}
		}
		switch kind {
		case kAllReduce, kNativeAllReduce, kReduceScatter, kReduceScatterV:
			if hk[hROp] != h0[hROp] {
				return c.mismatch("reduce op", 0, comm.ReduceOp(h0[hROp]).String(), k, comm.ReduceOp(hk[hROp]).String(), hk)
			}
		}
		switch kind {
		case kBroadcast:
			if hk[hRoot] != h0[hRoot] {
				return c.mismatch("root", 0, fmt.Sprint(h0[hRoot]), k, fmt.Sprint(hk[hRoot]), hk)
			}
		case kReduceScatterV, kAllGatherV:
			if hk[hHash1] != h0[hHash1] {
				return c.detailMismatch(k, hk)
			}
		case kNewSubgroups:
			if hk[hHash1] != h0[hHash1] || hk[hHash2] != h0[hHash2] {
				return c.detailMismatch(k, hk)
			}
		}
	}
	if kind == kAllToAllV && sumS != sumR {
		return c.detailMismatch(-1, header{})
	}
	return nil
}

func (c *call) mismatch(what string, j int, vj string, k int, vk string, hk header) error {
	return &comm.MismatchError{Group: c.g.name, GlobalRanks: c.g.global, Op: c.op, Seq: c.seq,
		What: what, Rank: j, Mine: vj, Peer: k, PeerOp: kindName(hk[hKind]), Theirs: vk}
}

// detailMismatch reports disagreeing counts, names or partitions (member k
// against member 0, or, for k < 0, AllToAllV's split sizes), after the
// members have swapped their values.
func (c *call) detailMismatch(k int, hk header) error {
	ds, err := c.swapDetails()
	if err != nil {
		return err
	}
	d0 := ds[0]
	switch opKind(c.hdr[hKind]) {
	case kReduceScatterV, kAllGatherV:
		return c.mismatch("counts", 0, fmt.Sprint(d0.Counts), k, fmt.Sprint(ds[k].Counts), hk)
	case kNewSubgroups:
		if d0.Name != ds[k].Name {
			return c.mismatch("name", 0, fmt.Sprintf("%q", d0.Name), k, fmt.Sprintf("%q", ds[k].Name), hk)
		}
		return c.mismatch("partition", 0, fmt.Sprint(d0.Parts), k, fmt.Sprint(ds[k].Parts), hk)
	}
	for j := range ds {
		for k := range ds {
			if ds[j].Send[k] != ds[k].Recv[j] {
				hk := header{hKind: int64(kAllToAllV)}
				return c.mismatch("split sizes", j, fmt.Sprintf("sendCounts[%d] = %d", k, ds[j].Send[k]),
					k, fmt.Sprintf("recvCounts[%d] = %d", j, ds[k].Recv[j]), hk)
			}
		}
	}
	return nil // a hash collision: the split sizes agree after all
}

// swapDetails sends this member's detail to every other member and
// receives theirs (point-to-point on hdr, tagged with the sequence number;
// an error path only).
func (c *call) swapDetails() ([]detail, error) {
	g := c.g
	n := len(g.global)
	tag := int(c.seq % uint64(g.w.tagUB+1))
	mine, _ := json.Marshal(c.det)
	out := make([]*request, n)
	p := c.mem.alloc(len(mine))
	copy(unsafe.Slice((*byte)(p), len(mine)), mine)
	for k := range n {
		if k == g.rank {
			continue
		}
		out[k] = c.req()
		if err := isend(p, len(mine), tByte, k, tag, g.hdr, out[k]); err != nil {
			return nil, c.mpiFailed(err)
		}
	}
	raw := make([][]byte, n)
	raw[g.rank] = mine
	in := make([]*request, n)
	bufs := make([]unsafe.Pointer, n)
	probed := make([]bool, n)
	test := func() (bool, error) {
		done := true
		for k := range n {
			if k == g.rank {
				continue
			}
			if ok, err := out[k].test("MPI_Isend"); err != nil {
				return true, err
			} else if !ok {
				done = false
			}
			if raw[k] != nil {
				continue
			}
			if !probed[k] {
				msg, ok, err := improbe(k, tag, g.hdr)
				if err != nil {
					return true, err
				}
				if !ok {
					done = false
					continue
				}
				bufs[k] = c.mem.alloc(msg.nbytes)
				in[k] = c.req()
				if err := imrecv(bufs[k], &msg, in[k]); err != nil {
					return true, err
				}
				probed[k] = true
			}
			ok, err := in[k].test("MPI_Imrecv")
			if err != nil {
				return true, err
			}
			if !ok {
				done = false
				continue
			}
			raw[k] = cBytes(bufs[k], in[k].nbytes)
		}
		return done, nil
	}
	if err := c.wait(nil, test); err != nil {
		return nil, err
	}
	ds := make([]detail, n)
	for k, b := range raw {
		if err := json.Unmarshal(b, &ds[k]); err != nil {
			return nil, fmt.Errorf("comm: %s on group %s: member %d's arguments are unreadable: %v", c.describe(), g.label(), k, err)
		}
		if opKind(c.hdr[hKind]) == kAllToAllV && (len(ds[k].Send) != n || len(ds[k].Recv) != n) {
			return nil, fmt.Errorf("comm: %s on group %s: member %d sent %d send and %d receive counts for %d members",
				c.describe(), g.label(), k, len(ds[k].Send), len(ds[k].Recv), n)
		}
	}
	return ds, nil
}
