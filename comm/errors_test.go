package comm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestGroupLabel(t *testing.T) {
	if got, want := GroupLabel("tp", []int{4, 5}), `"tp" [4 5]`; got != want {
		t.Errorf("GroupLabel = %s, want %s", got, want)
	}
	big := make([]int, 40)
	for i := range big {
		big[i] = i
	}
	want := `"world" [0 1 2 3 4 5 6 7 … (28 ranks) … 36 37 38 39]`
	if got := GroupLabel("world", big); got != want {
		t.Errorf("GroupLabel of 40 ranks = %s, want %s", got, want)
	}
}

func TestTimeoutError(t *testing.T) {
	cause := errors.New("disk on fire")
	e := &TimeoutError{Group: "dp", GlobalRanks: []int{0, 2, 4}, Rank: 0, GlobalRank: 0, Op: OpAllReduce, Seq: 7, Peer: -1,
		Waited: 1500 * time.Millisecond, Cause: ErrTimeout, Members: []MemberState{
			{Rank: 1, GlobalRank: 2, Status: StatusArrived, LastOp: OpAllReduce, LastSeq: 7},
			{Rank: 2, GlobalRank: 4, Status: StatusNotArrived, LastOp: OpBroadcast, LastSeq: 6, Doing: `Recv #3 from rank 0 on group "pp" [0 4]`},
		}}
	msg := e.Error()
	for _, w := range []string{`AllReduce #7 on group "dp" [0 2 4] at rank 0 (global 0)`, "1.5s", "--distributed-timeout-minutes",
		"rank 1 (global 2): arrived", "rank 2 (global 4): has not arrived; last issued Broadcast #6; blocked in Recv #3 from rank 0"} {
		if !strings.Contains(msg, w) {
			t.Errorf("TimeoutError message does not mention %q:\n%s", w, msg)
		}
	}
	if !errors.Is(e, ErrTimeout) || !errors.Is(e, context.DeadlineExceeded) {
		t.Error("a TimeoutError caused by ErrTimeout is not context.DeadlineExceeded")
	}
	p2p := &TimeoutError{Group: "pp", GlobalRanks: []int{0, 4}, Rank: 1, GlobalRank: 4, Op: OpRecv, Seq: 3, Peer: 0, Cause: context.Canceled,
		Members: []MemberState{{Rank: 0, GlobalRank: 0, Status: StatusFailed, Err: cause}}}
	for _, w := range []string{"Recv #3 from rank 0", "context canceled", "rank 0 (global 0): failed: disk on fire"} {
		if !strings.Contains(p2p.Error(), w) {
			t.Errorf("TimeoutError message does not mention %q:\n%s", w, p2p.Error())
		}
	}
	if !errors.Is(p2p, context.Canceled) {
		t.Error("errors.Is(TimeoutError, context.Canceled) is false for a canceled wait")
	}
}

func TestPeerAndMismatchErrors(t *testing.T) {
	cause := errors.New("boom")
	pe := &PeerError{FailedRank: 3, Cause: cause, Group: "tp", GlobalRank: 2, Op: OpAllGather, Seq: 4}
	if !errors.Is(pe, cause) || !strings.Contains(pe.Error(), `AllGather #4 on group "tp" at global rank 2: global rank 3 failed: boom`) {
		t.Errorf("PeerError: %v", pe)
	}
	me := &MismatchError{Group: "world", GlobalRanks: []int{0, 1}, Op: OpSend, Seq: 0, What: "dtype and length",
		Rank: 0, Mine: "float32[3]", Peer: 1, PeerOp: OpRecv, Theirs: "float32[4]"}
	for _, w := range []string{"Send #0", "rank 0 passed dtype and length float32[3]", "rank 1 passed float32[4] to Recv"} {
		if !strings.Contains(me.Error(), w) {
			t.Errorf("MismatchError message does not mention %q: %s", w, me)
		}
	}
}

func TestBuffer(t *testing.T) {
	b := F32([]float32{1, 2, 3, 4})
	if b.Len() != 4 || b.DType() != Float32 || b.Bytes() != 16 || b.String() != "float32[4]" {
		t.Errorf("F32 buffer: Len %d, DType %v, Bytes %d, %s", b.Len(), b.DType(), b.Bytes(), b)
	}
	s := b.Slice(1, 3)
	s.Float32s()[0] = 9
	if b.Float32s()[1] != 9 || s.Len() != 2 {
		t.Error("Slice does not share memory")
	}
	d := F32(make([]float32, 2))
	if n := d.CopyFrom(s); n != 2 || d.Float32s()[0] != 9 || d.Float32s()[1] != 3 {
		t.Errorf("CopyFrom copied %d: %v", n, d.Float32s())
	}
	for _, tt := range []struct {
		b    Buffer
		dt   DType
		size int
	}{{BF16(make([]uint16, 3)), BFloat16, 2}, {F16(make([]uint16, 3)), Float16, 2}, {I64(make([]int64, 3)), Int64, 8}} {
		if tt.b.DType() != tt.dt || tt.b.Len() != 3 || tt.b.Bytes() != 3*tt.size {
			t.Errorf("%v buffer: DType %v, Len %d, Bytes %d", tt.dt, tt.b.DType(), tt.b.Len(), tt.b.Bytes())
		}
	}
	var z Buffer
	if z.Len() != 0 || z.DType().Valid() || z.Slice(0, 0).Len() != 0 {
		t.Error("the zero Buffer is not empty and typeless")
	}
	defer func() {
		if recover() == nil {
			t.Error("CopyFrom across dtypes did not panic")
		}
	}()
	d.CopyFrom(I64(make([]int64, 2)))
}

func TestEffectiveTimeout(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{{0, DefaultTimeout}, {-1, 0}, {time.Second, time.Second}} {
		if got := (Options{Timeout: tt.in}).EffectiveTimeout(); got != tt.want {
			t.Errorf("Options{Timeout: %v}.EffectiveTimeout() = %v, want %v", tt.in, got, tt.want)
		}
	}
}
