package commtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/commtest"
	"github.com/gotron/gotron/comm/local"
)

// faulty wraps a correct group and spoils one operation on rank 1, so the
// suite can be shown to catch it.
type faulty struct {
	comm.Group
	spoil string
}

func (f faulty) AllReduce(ctx context.Context, buf comm.Buffer, op comm.ReduceOp) error {
	err := f.Group.AllReduce(ctx, buf, op)
	if f.spoil == "AllReduce" && f.Rank() == 1 && buf.Len() > 0 {
		switch buf.DType() {
		case comm.Float32:
			buf.Float32s()[buf.Len()-1] *= 1 + 1.0/(1<<22) // one ulp or so
		case comm.BFloat16, comm.Float16:
			buf.Uint16s()[0] ^= 1
		case comm.Int64:
			buf.Int64s()[0]++
		}
	}
	return err
}

func (f faulty) AllGather(ctx context.Context, out, in comm.Buffer) error {
	if f.spoil == "AllGather" && f.Rank() == 1 && in.Len() > 1 {
		in = in.Slice(1, in.Len()) // a short piece: rank 1 passes the wrong length
		return f.Group.AllGather(ctx, out.Slice(0, out.Len()-f.Size()), in)
	}
	return f.Group.AllGather(ctx, out, in)
}

func (f faulty) Recv(ctx context.Context, buf comm.Buffer, src int) error {
	err := f.Group.Recv(ctx, buf, src)
	if f.spoil == "Recv" && buf.Len() > 1 && buf.DType() == comm.Float32 {
		s := buf.Float32s()
		s[0], s[1] = s[1], s[0]
	}
	return err
}

// TestSuiteCatchesFaults runs cases against a backend with one spoiled
// operation each and expects every spoiling to be reported.
func TestSuiteCatchesFaults(t *testing.T) {
	cases := map[string]commtest.Case{}
	for _, c := range commtest.Cases() {
		cases[c.Name] = c
	}
	for _, tt := range []struct{ spoil, caseName string }{
		{"AllReduce", "AllReduce"},
		{"AllReduce", "ConcurrentGroups"},
		{"AllGather", "AllGather"},
		{"Recv", "SendRecv"},
	} {
		c := cases[tt.caseName]
		err := local.NewWorld(2, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
			return c.Rank(ctx, faulty{Group: g, spoil: tt.spoil})
		})
		var f *commtest.Failure
		var me *comm.MismatchError
		if !errors.As(err, &f) && !errors.As(err, &me) {
			t.Errorf("case %s with a spoiled %s returned %v, want a *commtest.Failure or a mismatch", tt.caseName, tt.spoil, err)
		}
	}
}
