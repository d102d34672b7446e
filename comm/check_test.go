package comm

import (
	"errors"
	"strings"
	"testing"
)

// fakeGroup is a Group whose identity is set and whose operations are not
// implemented: enough for the Check functions.
type fakeGroup struct {
	Group
	rank, size int
}

func (g fakeGroup) Rank() int    { return g.rank }
func (g fakeGroup) Size() int    { return g.size }
func (g fakeGroup) Name() string { return "dp" }
func (g fakeGroup) GlobalRanks() []int {
	s := make([]int, g.size)
	for i := range s {
		s[i] = 10 + 2*i
	}
	return s
}

func f32(n int) Buffer { return F32(make([]float32, n)) }

func TestChecks(t *testing.T) {
	g := fakeGroup{rank: 1, size: 3}
	tests := []struct {
		name  string
		err   error
		words []string // nil: the arguments are valid
	}{
		{"AllReduce ok", CheckAllReduce(g, f32(5), Avg), nil},
		{"AllReduce zero buffer", CheckAllReduce(g, Buffer{}, Sum), []string{"AllReduce", "zero Buffer", "comm.F32"}},
		{"AllReduce bad op", CheckAllReduce(g, f32(1), ReduceOp(7)), []string{"ReduceOp(7)", "comm.Sum"}},
		{"ReduceScatter ok", CheckReduceScatter(g, f32(2), f32(6), Sum), nil},
		{"ReduceScatter empty ok", CheckReduceScatter(g, f32(0), f32(0), Sum), nil},
		{"ReduceScatter short in", CheckReduceScatter(g, f32(2), f32(5), Sum), []string{"len(in) = 5", "3·2 = 6", "ReduceScatterV"}},
		{"ReduceScatter dtypes", CheckReduceScatter(g, I64(make([]int64, 2)), f32(6), Sum), []string{"out is int64 but in is float32"}},
		{"ReduceScatterV ok", CheckReduceScatterV(g, f32(0), f32(4), []int{4, 0, 0}, Max), nil},
		{"ReduceScatterV out", CheckReduceScatterV(g, f32(1), f32(4), []int{4, 0, 0}, Max), []string{"len(out) = 1", "counts[1] = 0"}},
		{"ReduceScatterV counts", CheckReduceScatterV(g, f32(1), f32(4), []int{4, 0}, Max), []string{"len(counts) = 2", "3 members"}},
		{"ReduceScatterV negative", CheckReduceScatterV(g, f32(1), f32(4), []int{4, -1, 1}, Max), []string{"counts[1] = -1"}},
		{"AllGather ok", CheckAllGather(g, f32(9), f32(3)), nil},
		{"AllGather out", CheckAllGather(g, f32(8), f32(3)), []string{"len(out) = 8", "3·3 = 9"}},
		{"AllGatherV ok", CheckAllGatherV(g, f32(5), f32(2), []int{3, 2, 0}), nil},
		{"AllGatherV in", CheckAllGatherV(g, f32(5), f32(3), []int{3, 2, 0}), []string{"len(in) = 3", "counts[1] = 2"}},
		{"Broadcast ok", CheckBroadcast(g, f32(3), 2), nil},
		{"Broadcast root", CheckBroadcast(g, f32(3), 3), []string{"root 3", "[0, 3)", "group ranks"}},
		{"AllToAll ok", CheckAllToAll(g, f32(6), f32(6)), nil},
		{"AllToAll uneven", CheckAllToAll(g, f32(7), f32(7)), []string{"divisible by the group size 3", "AllToAllV"}},
		{"AllToAllV ok", CheckAllToAllV(g, f32(3), f32(4), []int{1, 2, 1}, []int{0, 2, 1}), nil},
		{"AllToAllV self", CheckAllToAllV(g, f32(4), f32(4), []int{1, 2, 1}, []int{0, 3, 1}), []string{"sendCounts[1] = 2 but recvCounts[1] = 3"}},
		{"AllToAllV in", CheckAllToAllV(g, f32(3), f32(5), []int{1, 2, 1}, []int{0, 2, 1}), []string{"len(in) = 5", "Σ sendCounts = 4"}},
		{"Send ok", CheckP2P(g, OpSend, f32(1), 0), nil},
		{"Send self", CheckP2P(g, OpSend, f32(1), 1), []string{"itself"}},
		{"Recv range", CheckP2P(g, OpRecv, f32(1), -1), []string{"peer -1", "not global ranks"}},
		{"Batch ok", CheckBatchP2P(g, []P2POp{{Isend, f32(1), 0}, {Irecv, f32(1), 2}}), nil},
		{"Batch kind", CheckBatchP2P(g, []P2POp{{P2PKind(5), f32(1), 0}}), []string{"ops[0].Kind", "P2PKind(5)"}},
		{"Batch peer", CheckBatchP2P(g, []P2POp{{Isend, f32(1), 0}, {Irecv, f32(1), 4}}), []string{"ops[1]", "peer 4"}},
	}
	for _, tt := range tests {
		switch {
		case tt.words == nil && tt.err != nil:
			t.Errorf("%s: unexpected error %v", tt.name, tt.err)
		case tt.words != nil && tt.err == nil:
			t.Errorf("%s: no error", tt.name)
		case tt.words != nil:
			var ae *ArgError
			if !errors.As(tt.err, &ae) || ae.Rank != 1 || ae.Group != "dp" {
				t.Errorf("%s: %v is not an *ArgError of rank 1 of dp", tt.name, tt.err)
			}
			for _, w := range append(tt.words, `"dp" [10 12 14]`, "rank 1") {
				if !strings.Contains(tt.err.Error(), w) {
					t.Errorf("%s: %q does not mention %q", tt.name, tt.err, w)
				}
			}
		}
	}
}

func TestCheckPartition(t *testing.T) {
	g := fakeGroup{rank: 2, size: 4}
	for _, tt := range []struct {
		parts [][]int
		mine  int
		words []string
	}{
		{[][]int{{0, 1}, {2, 3}}, 1, nil},
		{[][]int{{3, 2, 1, 0}}, 0, nil},
		{[][]int{{0, 1}}, -1, nil},
		{nil, -1, nil},
		{[][]int{{0, 1}, {1, 2}}, -1, []string{"rank 1 is in both partition[0] and partition[1]"}},
		{[][]int{{0, 4}}, -1, []string{"rank 4", "[0, 4)"}},
		{[][]int{{0}, {}}, -1, []string{"partition[1]", "empty"}},
	} {
		mine, err := CheckPartition(g, "tp", tt.parts)
		if tt.words == nil {
			if err != nil || mine != tt.mine {
				t.Errorf("CheckPartition(%v) = %d, %v; want %d, nil", tt.parts, mine, err, tt.mine)
			}
			continue
		}
		if err == nil {
			t.Errorf("CheckPartition(%v): no error", tt.parts)
			continue
		}
		for _, w := range tt.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("CheckPartition(%v): %q does not mention %q", tt.parts, err, w)
			}
		}
	}
	if _, err := CheckPartition(g, "", nil); err == nil {
		t.Error("CheckPartition with an empty name: no error")
	}
}
