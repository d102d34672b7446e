package tp

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/internal/numtest"
)

// i64Data returns an Int64 DataTensor of the given shape holding
// base, base+1, ….
func i64Data(base int64, shape ...int) DataTensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]int64, n)
	for i := range v {
		v[i] = base + int64(i)
	}
	return DataTensor{Shape: shape, Buf: comm.I64(v)}
}

// broadcastOn runs BroadcastData on n ranks; rank r passes data(r) and
// dtype(r). It returns every rank's result and error.
func broadcastOn(t *testing.T, n int, keys []string, data func(r int) map[string]DataTensor, dtype func(r int) comm.DType) ([]map[string]DataTensor, []error) {
	t.Helper()
	outs, errs := make([]map[string]DataTensor, n), make([]error, n)
	runRanks(t, n, func(ctx context.Context, g comm.Group, _ *autograd.Tape) error {
		r := g.Rank()
		outs[r], errs[r] = BroadcastData(ctx, g, keys, data(r), dtype(r))
		return nil
	})
	return outs, errs
}

func constDType(d comm.DType) func(int) comm.DType { return func(int) comm.DType { return d } }

// sameData fails unless got has want's shape, dtype and elements.
func sameData(t *testing.T, what string, got, want DataTensor) {
	t.Helper()
	if len(got.Shape) != len(want.Shape) || (len(want.Shape) > 0 && !reflect.DeepEqual(got.Shape, want.Shape)) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape, want.Shape)
	}
	if got.Buf.DType() != want.Buf.DType() || got.Buf.Len() != want.Buf.Len() {
		t.Fatalf("%s: buffer %v, want %v", what, got.Buf, want.Buf)
	}
	switch want.Buf.DType() {
	case comm.Int64:
		if !reflect.DeepEqual(append([]int64{}, got.Buf.Int64s()...), append([]int64{}, want.Buf.Int64s()...)) {
			t.Fatalf("%s: %v, want %v", what, got.Buf.Int64s(), want.Buf.Int64s())
		}
	case comm.Float32:
		numtest.SameBits(t, what, got.Buf.Float32s(), want.Buf.Float32s())
	}
}

func TestBroadcastData(t *testing.T) {
	keys := []string{"text", "empty", "labels", "five", "scalar", "after"}
	src := map[string]DataTensor{
		"text":   i64Data(100, 2, 3),
		"empty":  i64Data(0, 2, 0, 3), // a zero-sized dimension keeps its shape
		"labels": i64Data(200, 2, 3),
		"five":   i64Data(300, 1, 2, 1, 2, 1), // MaxDataDim dimensions
		"scalar": i64Data(400),
		"after":  i64Data(500, 4),
		"unused": i64Data(600, 7),
	}
	for _, n := range mappingRanks {
		data := func(r int) map[string]DataTensor {
			if r == 0 {
				return src
			}
			if r == 1 { // other ranks' data is ignored
				return map[string]DataTensor{"text": i64Data(-1, 9)}
			}
			return nil
		}
		outs, errs := broadcastOn(t, n, keys, data, constDType(comm.Int64))
		for r := range outs {
			if errs[r] != nil {
				t.Fatalf("n=%d rank %d: %v", n, r, errs[r])
			}
			if len(outs[r]) != len(keys) {
				t.Fatalf("n=%d rank %d: %d keys, want %d", n, r, len(outs[r]), len(keys))
			}
			for _, k := range keys {
				sameData(t, fmt.Sprintf("n=%d rank %d %q", n, r, k), outs[r][k], src[k])
			}
		}
		// Rank 0's result is a copy, not its input.
		outs[0]["text"].Buf.Int64s()[0] = -7
		if src["text"].Buf.Int64s()[0] != 100 {
			t.Fatal("rank 0's result shares memory with its input")
		}
	}
}

func TestBroadcastDataFloat32(t *testing.T) {
	mask := DataTensor{Shape: []int{2, 3}, Buf: comm.F32(randn(3, 1, 6).Data())}
	pos := DataTensor{Shape: []int{3}, Buf: comm.F32([]float32{0, 1, 2})}
	for _, n := range mappingRanks {
		outs, errs := broadcastOn(t, n, []string{"loss_mask", "pos"}, func(r int) map[string]DataTensor {
			return map[string]DataTensor{"loss_mask": mask, "pos": pos}
		}, constDType(comm.Float32))
		for r := range outs {
			if errs[r] != nil {
				t.Fatalf("n=%d rank %d: %v", n, r, errs[r])
			}
			sameData(t, fmt.Sprintf("n=%d rank %d loss_mask", n, r), outs[r]["loss_mask"], mask)
			sameData(t, fmt.Sprintf("n=%d rank %d pos", n, r), outs[r]["pos"], pos)
		}
	}
}

// TestBroadcastDataErrors checks that a problem with rank 0's data fails
// on every rank, with the same message.
func TestBroadcastDataErrors(t *testing.T) {
	good := i64Data(1, 2, 2)
	cases := []struct {
		name string
		data map[string]DataTensor
		want string
	}{
		{"missing key", map[string]DataTensor{"a": good}, `key "b" is not in rank 0's data`},
		{"six dimensions", map[string]DataTensor{"a": good, "b": i64Data(0, 1, 1, 1, 1, 1, 2)}, `"b" has 6 dimensions, more than MaxDataDim = 5`},
		{"dtype mismatch", map[string]DataTensor{"a": good, "b": {Shape: []int{2}, Buf: comm.F32([]float32{1, 2})}},
			`"b" has data type float32 which is different than int64`},
		{"shape does not hold the elements", map[string]DataTensor{"a": good, "b": {Shape: []int{3}, Buf: comm.I64([]int64{1, 2})}},
			`"b" has a shape with a negative size or one that does not hold its 2 elements`},
		{"negative size", map[string]DataTensor{"a": good, "b": {Shape: []int{-1}, Buf: comm.I64(nil)}},
			`"b" has a shape with a negative size`},
	}
	for _, c := range cases {
		for _, n := range mappingRanks {
			data := func(r int) map[string]DataTensor {
				if r == 0 {
					return c.data
				}
				return nil
			}
			_, errs := broadcastOn(t, n, []string{"a", "b"}, data, constDType(comm.Int64))
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s, n=%d rank %d: error %v, want one containing %q", c.name, n, r, err, c.want)
				}
				if err.Error() != errs[0].Error() {
					t.Fatalf("%s, n=%d: rank %d says %q, rank 0 %q", c.name, n, r, err, errs[0])
				}
			}
		}
	}
}

// TestBroadcastDataDTypeDisagreement: a rank asking for another dtype than
// rank 0 gets an error (and nobody hangs); rank 0 succeeds.
func TestBroadcastDataDTypeDisagreement(t *testing.T) {
	src := map[string]DataTensor{"a": i64Data(1, 3)}
	outs, errs := broadcastOn(t, 2, []string{"a"}, func(int) map[string]DataTensor { return src }, func(r int) comm.DType {
		if r == 1 {
			return comm.Float32
		}
		return comm.Int64
	})
	if errs[0] != nil {
		t.Fatalf("rank 0: %v", errs[0])
	}
	sameData(t, "rank 0", outs[0]["a"], src["a"])
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "asked for float32 data but rank 0 sent int64") {
		t.Fatalf("rank 1: error %v, want one about the dtype", errs[1])
	}
}
