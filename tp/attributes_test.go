package tp

import (
	"strings"
	"testing"

	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

func TestSetTensorModelParallelAttributes(t *testing.T) {
	p := nn.NewParameter("weight", tensor.New(4, 2))
	if err := SetTensorModelParallelAttributes(p, true, 0, 2); err != nil {
		t.Fatal(err)
	}
	if !p.TensorModelParallel || p.PartitionDim != 0 || p.PartitionStride != 2 {
		t.Fatalf("attributes %v %d %d, want true 0 2", p.TensorModelParallel, p.PartitionDim, p.PartitionStride)
	}
	err := SetTensorModelParallelAttributes(p, true, 1, 1)
	if err == nil || !strings.Contains(err.Error(), "already set") || !strings.Contains(err.Error(), `"weight"`) {
		t.Fatalf("second set: error %v, want one saying weight's attributes are already set", err)
	}
	if p.PartitionDim != 0 || p.PartitionStride != 2 {
		t.Fatal("a failed set changed the attributes")
	}

	// A replicated parameter may be marked as such, and a zero Parameter is unset.
	q := nn.NewParameter("bias", tensor.New(4))
	if err := SetTensorModelParallelAttributes(q, false, -1, 1); err != nil {
		t.Fatal(err)
	}
	if err := SetTensorModelParallelAttributes(&nn.Parameter{}, true, 1, 1); err != nil {
		t.Fatalf("zero Parameter: %v", err)
	}
	for _, c := range []struct {
		parallel    bool
		dim, stride int
		want        string
	}{{true, 0, 0, "stride 0"}, {true, -1, 1, "partition dim"}} {
		err := SetTensorModelParallelAttributes(nn.NewParameter("w", tensor.New(1)), c.parallel, c.dim, c.stride)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: error %v, want one mentioning %q", c, err, c.want)
		}
	}
}

func TestSetDefaultsIfNotSetTensorModelParallelAttributes(t *testing.T) {
	var zero nn.Parameter
	SetDefaultsIfNotSetTensorModelParallelAttributes(&zero)
	if zero.TensorModelParallel || zero.PartitionDim != -1 || zero.PartitionStride != 1 {
		t.Fatalf("zero Parameter after defaults: %v %d %d, want false -1 1", zero.TensorModelParallel, zero.PartitionDim, zero.PartitionStride)
	}
	p := nn.NewParameter("w", tensor.New(2))
	p.TensorModelParallel, p.PartitionDim, p.PartitionStride = true, 1, 3
	SetDefaultsIfNotSetTensorModelParallelAttributes(p)
	if !p.TensorModelParallel || p.PartitionDim != 1 || p.PartitionStride != 3 {
		t.Fatal("defaults overwrote set attributes")
	}
}

func TestCopyTensorModelParallelAttributes(t *testing.T) {
	src := nn.NewParameter("w", tensor.New(2))
	src.TensorModelParallel, src.PartitionDim, src.PartitionStride = true, 1, 3
	dst := nn.NewParameter("main", tensor.New(2))
	CopyTensorModelParallelAttributes(dst, src)
	if !dst.TensorModelParallel || dst.PartitionDim != 1 || dst.PartitionStride != 3 {
		t.Fatalf("copied %v %d %d, want true 1 3", dst.TensorModelParallel, dst.PartitionDim, dst.PartitionStride)
	}
	if dst.Name != "main" {
		t.Fatal("copy changed the name")
	}
}

func TestParamIsNotTensorParallelDuplicate(t *testing.T) {
	split := nn.NewParameter("w", tensor.New(2))
	split.TensorModelParallel, split.PartitionDim = true, 0
	repl := nn.NewParameter("b", tensor.New(2))
	for r := 0; r < 4; r++ {
		if !ParamIsNotTensorParallelDuplicate(split, r) {
			t.Fatalf("split parameter on rank %d counted as a duplicate", r)
		}
		if got := ParamIsNotTensorParallelDuplicate(repl, r); got != (r == 0) {
			t.Fatalf("replicated parameter on rank %d: %v, want %v", r, got, r == 0)
		}
	}
}
