package dp

import (
	"context"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// The harness of the mixed-precision tests: a small model whose backward
// injects chosen gradients, the checks of a rank's buffer, and a log of
// the collectives' types.

// halfShapes is TestHalfGradients' model: 1 096 elements, several buckets
// of 300, padding under the distributed optimizer.
var halfShapes = []struct {
	name  string
	shape []int
}{
	{"embedding.word_embeddings.weight", []int{40, 8}},
	{"decoder.layers.0.self_attention.linear_qkv.weight", []int{24, 8}},
	{"decoder.layers.0.self_attention.linear_qkv.bias", []int{24}},
	{"decoder.layers.0.mlp.linear_fc1.weight", []int{32, 8}},
	{"decoder.layers.0.mlp.linear_fc1.bias", []int{32}},
	{"decoder.layers.0.mlp.linear_fc2.weight", []int{8, 32}},
	{"decoder.final_layernorm.weight", []int{8}},
	{"decoder.final_layernorm.bias", []int{8}},
}

// halfMicro is the number of microbatches per iteration.
const halfMicro = 2

// halfParams returns fresh float32 parameters of halfShapes, element i of
// parameter k holding paramIn(k, i).
func halfParams() []*nn.Parameter {
	ps := make([]*nn.Parameter, len(halfShapes))
	for k, s := range halfShapes {
		v := tensor.New(s.shape...)
		for i := range v.Data() {
			v.Data()[i] = paramIn(k, i)
		}
		ps[k] = nn.NewParameter(s.name, v)
	}
	return ps
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// spread maps h to a float32 in (−8, 8) with a full 24-bit mantissa and
// exponents from −6 to 2, so that rounding to 16 bits always matters.
func spread(h uint64) float32 {
	m := float32(int64(h>>40)-(1<<23)) / (1 << 23)
	return float32(math.Ldexp(float64(m), int(h>>8&7)-5))
}

func paramIn(k, i int) float32 { return spread(mix(uint64(k)<<32 | uint64(i))) }

// gradIn is rank's gradient contribution of microbatch mb in iteration it
// to element i of parameter p.
func gradIn(it, rank, mb, p, i int) float32 {
	return spread(mix(uint64(it)<<56 | uint64(rank)<<48 | uint64(mb)<<40 | uint64(p)<<32 | uint64(i) + 1))
}

// injectGrads is a Function whose backward adds grad(p, i) into the
// gradient of each of its parameter inputs, the way a layer accumulates
// into its weights' gradients: g ← r(w(g) + x) in a 16-bit gradient,
// g ← g + x in a float32 one. Its output is a scalar 0.
type injectGrads struct {
	ps    []*nn.Parameter
	index []int // halfShapes index of each input
	grad  func(p, i int) float32
}

func (f injectGrads) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	return tensor.Scalar(0), nil
}

func (f injectGrads) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	for j, p := range f.ps {
		x := make([]float32, p.Grad.Len())
		for i := range x {
			x[i] = f.grad(f.index[j], i)
		}
		if d := p.Grad.DType(); d.IsHalf() {
			w := make([]float32, len(x))
			tensor.WidenInto(d, w, p.Grad.Bits())
			kernels.AddInto(w, x)
			tensor.RoundInto(d, p.Grad.Bits(), w)
		} else {
			kernels.AddInto(p.Grad.Data(), x)
		}
	}
	return make([]*tensor.Tensor, len(f.ps)), nil
}

// halfBackward runs one microbatch's backward over ps (in reverse order,
// as backward reaches them), its gradients given by grad; under d's
// NoSync when noSync. The parameters' grad hooks run as in a real
// backward pass.
func halfBackward(ctx context.Context, d *DDP, ps []*nn.Parameter, noSync bool, grad func(p, i int) float32) error {
	f := injectGrads{grad: grad}
	var in []*autograd.Var
	for k := len(ps) - 1; k >= 0; k-- {
		f.ps, f.index, in = append(f.ps, ps[k]), append(f.index, k), append(in, ps[k].Var)
	}
	tape := autograd.NewTape(ctx)
	out := autograd.Apply(tape, f, in...)
	if noSync {
		defer d.NoSync()()
	}
	return autograd.Backward(tape, out, nil)
}

// halfRegion returns which buffer elements hold this rank's reduced
// gradients: all of them, or under the distributed optimizer its shards.
func halfRegion(t *testing.T, d *DDP) func(int) bool {
	if !d.cfg.UseDistributedOptimizer {
		return func(int) bool { return true }
	}
	shards, _, err := d.Shards()
	if err != nil {
		t.Fatal(err)
	}
	return func(gi int) bool {
		for _, s := range shards {
			if gi >= s.World[0] && gi < s.World[1] {
				return true
			}
		}
		return false
	}
}

// elem returns element i of a buffer, widened.
func elem(b comm.Buffer, i int) float32 {
	f := []float32{0}
	widenInto(f, b.Slice(i, i+1))
	return f[0]
}

// checkHalfGrads compares, bit for bit, every gradient element of ps in
// region with want — in the buffer, and in the float32 local gradient of a
// parameter that has one — reporting the first difference per parameter.
func checkHalfGrads(t *testing.T, d *DDP, ps []*nn.Parameter, want func(p, i int) float32, region func(int) bool, who string) {
	t.Helper()
	for k, p := range ps {
		r, _ := d.Buffer.Range(p)
		buf := d.Buffer.GradInBuffer(p)
		for i := 0; i < buf.Len(); i++ {
			if !region(r.Start + i) {
				continue
			}
			w := want(k, i)
			if got := elem(buf, i); math.Float32bits(got) != math.Float32bits(w) {
				t.Errorf("%s: %s[%d] = %v in the gradient buffer, want %v", who, p.Name, i, got, w)
				break
			}
			if d.Buffer.HasFP32Grad(p) {
				if got := p.Grad.Data()[i]; math.Float32bits(got) != math.Float32bits(w) {
					t.Errorf("%s: %s[%d] = %v in its float32 gradient, want %v", who, p.Name, i, got, w)
					break
				}
			}
		}
	}
}

// padding returns the buffer elements that belong to no parameter.
func padding(b *Buffer) []int {
	owned := make([]bool, b.Layout.Numel)
	for _, r := range b.Layout.Ranges {
		for i := r.Start; i < r.End; i++ {
			owned[i] = true
		}
	}
	var pad []int
	for i, o := range owned {
		if !o {
			pad = append(pad, i)
		}
	}
	return pad
}

// isZero reports whether element i of b is +0.
func isZero(b comm.Buffer, i int) bool {
	if h := b.Uint16s(); h != nil {
		return h[i] == 0
	}
	return math.Float32bits(b.Float32s()[i]) == 0
}

// checkPadding checks that the padding of both arrays is +0.
func checkPadding(t *testing.T, d *DDP, who string) {
	t.Helper()
	for _, i := range padding(d.Buffer) {
		if !isZero(d.Buffer.GradData, i) || !isZero(d.Buffer.ParamData, i) {
			t.Errorf("%s: padding element %d is gradient %v, parameter %v; want +0", who, i, elem(d.Buffer.GradData, i), elem(d.Buffer.ParamData, i))
			return
		}
	}
}

// checkParamGather plays the distributed optimizer's update: this rank
// writes updated(rank, it, i) into the parameter elements of its shards
// and junk everywhere else (padding included), then gathers the
// parameters — from the forward pre-hook under overlap_param_gather, which
// prefetches the next bucket group's all-gather, else StartParamSync —
// and checks every element against its owner's value in the parameter
// type (padding: +0), through the buffer and through the parameters'
// 16-bit values.
func checkParamGather(ctx context.Context, t *testing.T, d *DDP, ps []*nn.Parameter, rank, it, instances int) error {
	b := d.Buffer
	mine := halfRegion(t, d)
	isPad := map[int]bool{}
	for _, i := range padding(b) {
		isPad[i] = true
	}
	per := d.shards
	owner := func(gi int) int { // world rank of gi's owner in this rank's instance
		for _, bk := range b.Buckets {
			if gi >= bk.Start && gi < bk.End {
				return rank/per*per + (gi-bk.Start)/((bk.End-bk.Start)/per)
			}
		}
		panic("outside the buffer")
	}
	updated := func(r, gi int) float32 { return spread(mix(uint64(it+7)<<48 | uint64(r)<<32 | uint64(gi))) }
	for gi := 0; gi < b.Layout.Numel; gi++ {
		switch {
		case !mine(gi):
			roundInto(b.ParamData.Slice(gi, gi+1), []float32{-1234.5})
		case !isPad[gi]:
			roundInto(b.ParamData.Slice(gi, gi+1), []float32{updated(rank, gi)})
		}
	}
	var err error
	if d.cfg.OverlapParamGather {
		err = d.ParamPreHook(ctx, ps)
	} else {
		err = d.StartParamSync(ctx, false)
	}
	if err != nil {
		return err
	}
	for gi := 0; gi < b.Layout.Numel; gi++ {
		want := float32(0)
		if !isPad[gi] {
			want = r16(b.ParamDType, updated(owner(gi), gi))
		}
		if got := elem(b.ParamData, gi); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("rank %d iteration %d: gathered parameter element %d = %v, want %v (rank %d's)", rank, it+1, gi, got, want, owner(gi))
			return nil
		}
	}
	for _, p := range ps {
		r, _ := b.Range(p)
		if got, want := p.Value.Float32().Data()[0], elem(b.ParamData, r.Start); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("rank %d: %s reads %v, its buffer element %v", rank, p.Name, got, want)
		}
	}
	return nil
}

// collLog records the floating-point collectives issued through the groups
// it wraps, as "op:dtype".
type collLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *collLog) wrap(g comm.Group) comm.Group {
	if g == nil {
		return nil
	}
	return logGroup{g, l}
}

func (l *collLog) note(op string, b comm.Buffer) {
	if b.DType() == comm.Int64 {
		return // the gradient check's findings
	}
	l.mu.Lock()
	l.ops = append(l.ops, op+":"+b.DType().String())
	l.mu.Unlock()
}

func (l *collLog) reset() { l.take() }

func (l *collLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}

type logGroup struct {
	comm.Group
	l *collLog
}

func (g logGroup) AllReduce(ctx context.Context, b comm.Buffer, op comm.ReduceOp) error {
	g.l.note("allreduce", b)
	return g.Group.AllReduce(ctx, b, op)
}

func (g logGroup) AllReduceAsync(ctx context.Context, b comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	g.l.note("allreduce", b)
	return g.Group.AllReduceAsync(ctx, b, op)
}

func (g logGroup) ReduceScatterAsync(ctx context.Context, out, in comm.Buffer, op comm.ReduceOp) (comm.Work, error) {
	g.l.note("reducescatter", in)
	return g.Group.ReduceScatterAsync(ctx, out, in, op)
}

func (g logGroup) AllToAll(ctx context.Context, out, in comm.Buffer) error {
	g.l.note("alltoall", in)
	return g.Group.AllToAll(ctx, out, in)
}

func (g logGroup) AllGather(ctx context.Context, out, in comm.Buffer) error {
	g.l.note("allgather", in)
	return g.Group.AllGather(ctx, out, in)
}

func (g logGroup) AllGatherAsync(ctx context.Context, out, in comm.Buffer) (comm.Work, error) {
	g.l.note("allgather", in)
	return g.Group.AllGatherAsync(ctx, out, in)
}

func (g logGroup) Broadcast(ctx context.Context, b comm.Buffer, root int) error {
	g.l.note("broadcast", b)
	return g.Group.Broadcast(ctx, b, root)
}

// gradOps is the set of collectives the gradient reduction issues.
func gradOps(cfg config.DDPConfig, d *DDP, inter comm.Group) []string {
	var ops []string
	switch {
	case d.group == nil:
	case cfg.UseDistributedOptimizer && cfg.ReduceScatterWithFP32Accumulation:
		ops = append(ops, "alltoall")
	case cfg.UseDistributedOptimizer:
		ops = append(ops, "reducescatter")
	default:
		ops = append(ops, "allreduce")
	}
	if inter != nil && inter.Size() > 1 {
		ops = append(ops, "allreduce")
	}
	return ops
}

func opsIf(cond bool, op string) []string {
	if cond {
		return []string{op}
	}
	return nil
}

// checkOps checks that the recorded collectives are exactly the kinds in
// want, each in type d.
func checkOps(t *testing.T, got, want []string, d tensor.DType, what string) {
	t.Helper()
	kinds := map[string]bool{}
	for _, g := range got {
		op, dt, _ := strings.Cut(g, ":")
		if dt != d.String() {
			t.Errorf("%s: a %s in %s, want %v", what, op, dt, d)
		}
		kinds[op] = true
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	w := append([]string(nil), want...)
	sort.Strings(w)
	w = compactStrings(w)
	if strings.Join(ks, ",") != strings.Join(w, ",") {
		t.Errorf("%s: collectives %v, want the kinds %v", what, got, w)
	}
}

func compactStrings(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
