package dp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/rng"
)

// toyModel is dp's test model, a three-layer perceptron whose loss for a
// row is the sum of its output: parameters of different sizes, so that
// buckets split them, and the first registered one (where a GPT keeps its
// word embedding) gets its gradient last in a backward pass.
type toyModel struct {
	WordEmbeddings *nn.Parameter // the first layer's weight
	params         []*nn.Parameter
}

// newToy draws the toy's weights from seed.
func newToy(seed uint64) (*toyModel, error) {
	g := rng.New(seed)
	m := &toyModel{}
	for _, p := range []struct {
		name  string
		shape []int
	}{{"embedding.weight", []int{48, 32}}, {"fc1.weight", []int{40, 48}}, {"fc1.bias", []int{40}}, {"fc2.weight", []int{16, 40}}} {
		v := tensor.New(p.shape...)
		g.FillNormal(v.Data(), 0, 0.2)
		m.params = append(m.params, nn.NewParameter(p.name, v))
	}
	m.WordEmbeddings = m.params[0]
	return m, nil
}

// Parameters and RegisteredParameters are the toy's parameters in
// registration order.
func (m *toyModel) Parameters() []*nn.Parameter           { return m.params }
func (m *toyModel) RegisteredParameters() []*nn.Parameter { return m.params }

// Parameter returns the parameter called name.
func (m *toyModel) Parameter(name string) *nn.Parameter {
	for _, p := range m.params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// loss is row's loss times scale: the sum of fc2·gelu(fc1·gelu(E·x) + b)
// for an input x of 32 values fixed by the row.
func (m *toyModel) loss(tape *autograd.Tape, row int, scale float32) *autograd.Var {
	x := tensor.New(1, 32)
	for i, d := 0, x.Data(); i < len(d); i++ {
		d[i] = float32(math.Cos(float64(3*row + i)))
	}
	p := m.params
	h := nn.GELU(tape, nn.Linear(tape, autograd.Const(x), p[0].Var, nil))
	h = nn.GELU(tape, nn.Linear(tape, h, p[1].Var, p[2].Var))
	y := nn.Linear(tape, h, p[3].Var, nil)
	return autograd.Scale(tape, autograd.Sum(tape, y), scale)
}

const rowsTotal = 8

// accumulate runs forward and backward over rows [row0, row0+rows) of the
// global batch, one row per micro-batch, each loss scaled by 1/micro, as
// the trainer does with micro micro-batches. All but the last micro-batch
// run under d's NoSync when d is set.
func accumulate(t *testing.T, tape *autograd.Tape, m *toyModel, d *DDP, row0, rows, micro int) {
	t.Helper()
	for k := 0; k < rows; k++ {
		var resume func()
		if d != nil && k < rows-1 {
			resume = d.NoSync()
		}
		err := autograd.Backward(tape, m.loss(tape, row0+k, 1/float32(micro)), nil)
		if resume != nil {
			resume()
		}
		if err != nil {
			t.Error(err)
			return
		}
	}
}

// wrap builds a DDP over m's parameters in registration order.
func wrap(t *testing.T, ctx context.Context, m *toyModel, cfg config.DDPConfig, o Options) *DDP {
	t.Helper()
	d, err := New(m.RegisteredParameters(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// serialGrads is the reference: one rank, the whole global batch.
func serialGrads(t *testing.T) map[string][]float32 {
	m, err := newToy(3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := wrap(t, ctx, m, config.DefaultDDPConfig(), Options{BucketSize: config.NoBucketing})
	accumulate(t, autograd.NewTape(ctx), m, d, 0, rowsTotal, rowsTotal)
	if err := d.FinishGradSync(ctx, false); err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, p := range m.Parameters() {
		out[p.Name] = append([]float32(nil), p.Grad.Data()...)
	}
	return out
}

// ddpCase is a data-parallel configuration the gradient tests run.
type ddpCase struct {
	name      string
	cfg       func(*config.DDPConfig)
	bucket    int // resolved bucket size
	instances int
}

func ddpCases() []ddpCase {
	return []ddpCase{
		{"sync", func(c *config.DDPConfig) {}, config.NoBucketing, 1},
		{"sync-avg", func(c *config.DDPConfig) { c.AverageInCollective = true }, config.NoBucketing, 1},
		{"overlap", func(c *config.DDPConfig) { c.OverlapGradReduce = true }, 1000, 1},
		{"overlap-per-param-avg", func(c *config.DDPConfig) { c.OverlapGradReduce, c.AverageInCollective = true, true }, 0, 1},
		{"distopt", func(c *config.DDPConfig) { c.UseDistributedOptimizer = true }, config.NoBucketing, 1},
		{"distopt-overlap", func(c *config.DDPConfig) { c.UseDistributedOptimizer, c.OverlapGradReduce = true, true }, 700, 1},
		{"distopt-busbw-nan-check", func(c *config.DDPConfig) {
			c.UseDistributedOptimizer, c.PadBucketsForHighNCCLBusBW, c.CheckForNaNInGrad, c.CheckForLargeGrads = true, true, true, true
		}, 2000, 1},
		{"distopt-fp32-accumulation", func(c *config.DDPConfig) {
			c.UseDistributedOptimizer, c.OverlapGradReduce, c.ReduceScatterWithFP32Accumulation = true, true, true
		}, 1500, 1},
		{"distopt-2-instances", func(c *config.DDPConfig) {
			c.UseDistributedOptimizer, c.OverlapGradReduce, c.NumDistributedOptimizerInstances = true, true, 2
		}, 900, 2},
	}
}

// groupsFor returns the reduction group and the inter-instance group of
// an n-rank world split into k optimizer instances of consecutive ranks.
func groupsFor(ctx context.Context, g comm.Group, k int) (intra, inter comm.Group, err error) {
	if k == 1 {
		return g, nil, nil
	}
	n := g.Size()
	var ip, xp [][]int
	for i := 0; i < k; i++ {
		var row []int
		for r := i * n / k; r < (i+1)*n/k; r++ {
			row = append(row, r)
		}
		ip = append(ip, row)
	}
	for j := 0; j < n/k; j++ {
		var col []int
		for i := 0; i < k; i++ {
			col = append(col, i*n/k+j)
		}
		xp = append(xp, col)
	}
	if intra, err = g.NewSubgroups(ctx, "intra-dp-cp", ip); err != nil {
		return nil, nil, err
	}
	inter, err = g.NewSubgroups(ctx, "inter-dist-opt", xp)
	return intra, inter, err
}

// TestGradientsMatchSingleRank splits the global batch over 2 and 4
// data-parallel ranks, one row per micro-batch, all but the last under
// NoSync, for every configuration of ddpCases, over two iterations (the
// first starts the reductions in FinishGradSync, the second from the grad
// hooks), and checks every rank's reduced gradients — gathered from the
// shards under the distributed optimizer — against the single-rank
// gradients (relative 1e-6: the sums are ordered differently).
func TestGradientsMatchSingleRank(t *testing.T) {
	want := serialGrads(t)
	for _, n := range []int{2, 4} {
		for _, tc := range ddpCases() {
			if n%tc.instances != 0 {
				continue
			}
			t.Run(fmt.Sprintf("dp%d/%s", n, tc.name), func(t *testing.T) {
				cfg := config.DefaultDDPConfig()
				tc.cfg(&cfg)
				err := local.NewWorld(n, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
					intra, inter, err := groupsFor(ctx, g, tc.instances)
					if err != nil {
						return err
					}
					m, err := newToy(3)
					if err != nil {
						return err
					}
					d, err := New(m.RegisteredParameters(), cfg, Options{Group: intra, Inter: inter, BucketSize: tc.bucket})
					if err != nil {
						return err
					}
					per := rowsTotal / n
					for it := 0; it < 2; it++ {
						d.ZeroGradBuffer()
						accumulate(t, autograd.NewTape(ctx), m, d, g.Rank()*per, per, per)
						if err := FinalizeModelGrads(ctx, []Wrapper{d}, FinalizeOptions{}); err != nil {
							return err
						}
						if err := d.AllGatherGrads(ctx); err != nil {
							return err
						}
						for _, p := range m.Parameters() {
							if e := rel(p.Grad.Data(), want[p.Name]); e > 1e-6 {
								t.Errorf("iteration %d rank %d: %s differs from one rank by %.3g", it+1, g.Rank(), p.Name, e)
							}
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func rel(got, want []float32) float64 {
	var d, n float64
	for i := range want {
		e := float64(got[i] - want[i])
		d += e * e
		n += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(d / math.Max(n, 1e-30))
}

// TestBufferViewsAndPadding: under the distributed optimizer at dp 4 with
// small buckets, every parameter's value and gradient are views of the
// buffers at its layout range (64-aligned), the padding stays zero through
// a backward pass, and ScaleGradients and ZeroGradBuffer act on the views.
func TestBufferViewsAndPadding(t *testing.T) {
	ctx := context.Background()
	m, _ := newToy(3)
	before := map[string][]float32{}
	for _, p := range m.Parameters() {
		before[p.Name] = append([]float32(nil), p.Value.Data()...)
	}
	cfg := config.DefaultDDPConfig()
	cfg.UseDistributedOptimizer = true
	d, err := New(m.RegisteredParameters(), cfg, Options{BucketSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	b := d.Buffer
	if len(b.Buckets) < 3 {
		t.Fatalf("%d buckets; the test wants several", len(b.Buckets))
	}
	owned := make([]bool, b.GradData.Len())
	for _, p := range m.Parameters() {
		r, ok := b.Range(p)
		if !ok || r.Start%ParamAlign != 0 {
			t.Fatalf("%s: range %+v", p.Name, r)
		}
		if &p.Grad.Data()[0] != &b.GradData.Float32s()[r.Start] || &p.Value.Data()[0] != &b.ParamData.Float32s()[r.Start] || p.Value.Len() != r.End-r.Start {
			t.Errorf("%s is not a view of the buffers at %+v", p.Name, r)
		}
		if rel(p.Value.Data(), before[p.Name]) != 0 {
			t.Errorf("%s changed value when moved into the buffer", p.Name)
		}
		for i := r.Start; i < r.End; i++ {
			owned[i] = true
		}
	}
	pad := 0
	for i, o := range owned {
		if !o {
			pad++
			b.ParamData.Float32s()[i] = 0
		}
	}
	if pad == 0 {
		t.Fatal("no padding in the layout; the test wants some")
	}
	accumulate(t, autograd.NewTape(ctx), m, nil, 0, 2, 2)
	for i, o := range owned {
		if !o && b.GradData.Float32s()[i] != 0 {
			t.Fatalf("padding element %d holds gradient %g", i, b.GradData.Float32s()[i])
		}
	}
	p := m.Parameters()[3]
	g0 := p.Grad.Data()[0]
	d.ScaleGradients(2)
	if p.Grad.Data()[0] != 2*g0 {
		t.Errorf("ScaleGradients: %v, want %v", p.Grad.Data()[0], 2*g0)
	}
	d.ZeroGradBuffer()
	for _, v := range b.GradData.Float32s() {
		if v != 0 {
			t.Fatal("ZeroGradBuffer left a non-zero gradient")
		}
	}
}

func TestBroadcastParams(t *testing.T) {
	err := local.NewWorld(3, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		m, _ := newToy(uint64(10 + g.Rank())) // different weights per rank
		d := wrap(t, ctx, m, config.DefaultDDPConfig(), Options{Group: g, BucketSize: config.NoBucketing})
		if err := d.BroadcastParams(ctx); err != nil {
			return err
		}
		ref, _ := newToy(10)
		for i, p := range m.Parameters() {
			if rel(p.Value.Data(), ref.Parameters()[i].Value.Data()) != 0 {
				t.Errorf("rank %d: %s differs from rank 0's after broadcast", g.Rank(), p.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeadRankStopsOthers kills rank 1 between its backward and the
// gradient all-reduce: the other ranks, waiting in the all-reduce, must
// return promptly (well within the timeout) with an error naming rank 1.
func TestDeadRankStopsOthers(t *testing.T) {
	const timeout = 20 * time.Second
	start := time.Now()
	err := local.NewWorld(3, comm.Options{Timeout: timeout}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		m, _ := newToy(3)
		d := wrap(t, ctx, m, config.DefaultDDPConfig(), Options{Group: g, BucketSize: config.NoBucketing})
		accumulate(t, autograd.NewTape(ctx), m, d, g.Rank(), 1, 1)
		if g.Rank() == 1 {
			panic("rank 1 lost its machine")
		}
		return d.FinishGradSync(ctx, false)
	})
	if err == nil {
		t.Fatal("no error")
	}
	if el := time.Since(start); el > timeout/2 {
		t.Errorf("the surviving ranks took %v to stop", el)
	}
	var re *local.RunError
	if !errors.As(err, &re) || re.Rank != 1 || !strings.Contains(err.Error(), "lost its machine") {
		t.Fatalf("error does not name rank 1 and its cause: %v", err)
	}
	for r, e := range re.Errs {
		var pe *comm.PeerError
		if r != 1 && (!errors.As(e, &pe) || pe.FailedRank != 1) {
			t.Errorf("rank %d returned %v, want a peer error naming rank 1", r, e)
		}
	}
}
