package cp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/cp"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// attnCase is one context-parallel attention problem: qkv [s, b, heads·3·d]
// split over cp ranks.
type attnCase struct {
	typ          cp.CommType
	cp, s, b     int
	heads, d     int
	hierarchical []int
	dropout      float32
	// seg, when set, are the rows' segment ids [b, s] (the whole sequence).
	seg []int32
}

func (c attnCase) String() string {
	h := ""
	if c.hierarchical != nil {
		h = fmt.Sprint(c.hierarchical)
	}
	return fmt.Sprintf("%s%s/cp%d/s%d", c.typ, h, c.cp, c.s)
}

// randn returns a tensor of N(0, 1) values drawn from seed.
func randn(seed uint64, shape ...int) *tensor.Tensor {
	x := tensor.New(shape...)
	rng.New(seed).FillNormal(x.Data(), 0, 1)
	return x
}

// rowsOf returns the rows (first dimension) pos of x [s, …] as a new tensor.
func rowsOf(x *tensor.Tensor, pos []int) *tensor.Tensor {
	w := x.Len() / x.Dim(0)
	shape := append([]int{len(pos)}, x.Shape()[1:]...)
	out := tensor.New(shape...)
	for i, p := range pos {
		copy(out.Data()[i*w:(i+1)*w], x.Data()[p*w:(p+1)*w])
	}
	return out
}

// serial runs the one-rank attention (with segment ids seg [b, s], or
// nil): output and the gradient of qkv for the output gradient dy.
func serial(t *testing.T, qkv, dy *tensor.Tensor, heads int, seg []int32) (y, dx *tensor.Tensor) {
	t.Helper()
	tape := autograd.NewTape(context.Background())
	x := autograd.NewLeaf(qkv.Clone(), "qkv", true)
	out := nn.Attention(tape, x, heads, nn.AttentionOptions{Segments: seg})
	if err := autograd.Backward(tape, out, dy); err != nil {
		t.Fatal(err)
	}
	return out.Value, x.Grad
}

// parallel runs c on c.cp in-process ranks and returns the output and
// the gradient of qkv gathered back into sequence order, and the ring's
// receive wait.
func parallel(t *testing.T, c attnCase, qkv, dy *tensor.Tensor) (y, dx *tensor.Tensor) {
	t.Helper()
	y, dx = tensor.New(qkv.Dim(0), c.b, c.heads*c.d), tensor.New(qkv.Shape()...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	err := local.NewWorld(c.cp, comm.Options{Timeout: 30 * time.Second}).Run(ctx, func(ctx context.Context, g comm.Group) error {
		groups, err := cp.NewGroups(ctx, g, c.hierarchical)
		if err != nil {
			return err
		}
		pos := cp.Positions(c.s, c.cp, g.Rank())
		tape := autograd.NewTape(ctx)
		x := autograd.NewLeaf(rowsOf(qkv, pos), "qkv", true)
		out := cp.Attention(tape, x, c.heads, cp.Options{Type: c.typ, Groups: groups, Dropout: c.dropout, RNG: rng.New(7), Segments: c.seg})
		if err := tape.Err(); err != nil {
			return err
		}
		if err := autograd.Backward(tape, out, rowsOf(dy, pos)); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		scatterRows(y, out.Value, pos)
		scatterRows(dx, x.Grad, pos)
		return nil
	})
	if err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	return y, dx
}

// scatterRows writes the rows of part into dst's rows pos.
func scatterRows(dst, part *tensor.Tensor, pos []int) {
	w := dst.Len() / dst.Dim(0)
	for i, p := range pos {
		copy(dst.Data()[p*w:(p+1)*w], part.Contiguous().Data()[i*w:(i+1)*w])
	}
}

// TestAttentionMatchesOneRank: for every communication type, cp 2 and 4,
// sequence lengths that are and are not powers of two (and chunks longer
// than the kernels' 64-row slabs), the output and the gradients of q, k, v
// gathered back to the whole sequence equal the one-rank attention's to
// 1e-6 relative.
func TestAttentionMatchesOneRank(t *testing.T) {
	var cases []attnCase
	for _, n := range []int{2, 4} {
		for _, s := range []int{64, 8 * 3 * 5, 8 * 65} {
			for _, typ := range []cp.CommType{cp.P2P, cp.AllGather, cp.A2A} {
				cases = append(cases, attnCase{typ: typ, cp: n, s: s, b: 2, heads: 4, d: 8})
			}
			cases = append(cases, attnCase{typ: cp.A2AP2P, cp: n, s: s, b: 2, heads: 4, d: 8, hierarchical: []int{2, n / 2}})
			if n == 4 {
				cases = append(cases, attnCase{typ: cp.A2AP2P, cp: n, s: s, b: 2, heads: 4, d: 8, hierarchical: []int{4, 1}})
			}
		}
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			qkv := randn(uint64(c.s), c.s, c.b, c.heads*3*c.d)
			dy := randn(uint64(c.s)+1, c.s, c.b, c.heads*c.d)
			wy, wdx := serial(t, qkv, dy, c.heads, nil)
			y, dx := parallel(t, c, qkv, dy)
			numtest.CloseNorm(t, "output", y.Data(), wy.Contiguous().Data(), 1e-6)
			numtest.CloseNorm(t, "dq, dk, dv", dx.Data(), wdx.Contiguous().Data(), 1e-6)
		})
	}
}

// TestAllGatherForwardIsTheRing: all_gather attends to the gathered blocks
// in the ring's order, so its forward output has the ring's bits.
func TestAllGatherForwardIsTheRing(t *testing.T) {
	for _, n := range []int{2, 4} {
		c := attnCase{cp: n, s: 8 * 3 * 5, b: 2, heads: 4, d: 8}
		qkv := randn(3, c.s, c.b, c.heads*3*c.d)
		dy := randn(4, c.s, c.b, c.heads*c.d)
		c.typ = cp.P2P
		ring, _ := parallel(t, c, qkv, dy)
		c.typ = cp.AllGather
		gathered, _ := parallel(t, c, qkv, dy)
		numtest.SameBits(t, fmt.Sprintf("cp %d output", n), gathered.Data(), ring.Data())
	}
}
