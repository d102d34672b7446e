package optim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// toyParams are three parameters of different shapes (a matrix, a vector
// that Adam does not decay, another matrix), the same on every call.
func toyParams() []*nn.Parameter {
	mk := func(name string, shape ...int) *nn.Parameter {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(i+len(name)))) / 2
		}
		return nn.NewParameter(name, tensor.FromSlice(v, shape...))
	}
	return []*nn.Parameter{mk("w1", 9, 7), mk("b1", 9), mk("w2", 5, 9)}
}

// toyGrad is data-parallel rank r's gradient of element i of parameter k
// in iteration it.
func toyGrad(it, r, k, i int) float32 {
	return float32(math.Cos(float64(3*it+5*r+7*k+i))) * float32(1+r)
}

var toyAdam = AdamConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Decoupled: true}

// toyHyper is the toy tests' step: learning rate 1e-2, weight decay 0.1.
var toyHyper = Hyper{LR: 1e-2, WeightDecay: 0.1}

// serialSteps is the reference: one rank, whose gradient is the
// data-parallel ranks' mean as the reduction forms it (each scaled by 1/n,
// summed in rank order), stepped iters times by the plain optimizer.
func serialSteps(t *testing.T, opt AdamConfig, n, iters int, clip float64) ([][]float32, []float64) {
	ps := toyParams()
	o := NewPlain(ps, opt, Options{ClipGrad: clip, Norm: []NormPart{{}}})
	var norms []float64
	for it := range iters {
		for k, p := range ps {
			g := make([]float32, p.Value.Len())
			for i := range g {
				for r := range n {
					g[i] += toyGrad(it, r, k, i) * (1 / float32(n))
				}
			}
			p.Grad = tensor.FromSlice(g, p.Value.Shape()...)
		}
		ok, norm, err := Step(context.Background(), o, toyHyper)
		if err != nil || !ok {
			t.Fatalf("serial step %d: ok %v, %v", it, ok, err)
		}
		norms = append(norms, norm)
	}
	out := make([][]float32, len(ps))
	for k, p := range ps {
		out[k] = p.Value.Data()
	}
	return out, norms
}

// toySGD is SGD with momentum (--optimizer sgd --sgd-momentum 0.9).
var toySGD = AdamConfig{SGD: true, Momentum: 0.9}

// TestDistributedStepMatchesSerial: the distributed optimizer over 2 and 4
// data-parallel ranks (gradients reduce-scattered by dp.DDP, each rank
// updating its shard, the parameters all-gathered) leaves every rank with
// the serial optimizer's parameters, bit for bit without clipping, and
// to 1e-6 with it (the norm's squares are summed shard by shard); the
// norms agree to 1e-12. So does SGD with momentum (each rank's shard of
// the momentum buffer).
func TestDistributedStepMatchesSerial(t *testing.T) {
	for _, clip := range []float64{0, 0.5} {
		for _, n := range []int{2, 4} {
			for name, opt := range map[string]AdamConfig{"adam": toyAdam, "sgd": toySGD} {
				t.Run(fmt.Sprintf("%s/dp%d/clip%g", name, n, clip), func(t *testing.T) {
					testDistributedStep(t, opt, n, clip)
				})
			}
		}
	}
}

func testDistributedStep(t *testing.T, opt AdamConfig, n int, clip float64) {
	want, wantNorms := serialSteps(t, opt, n, 3, clip)
	cfg := config.DefaultDDPConfig()
	cfg.UseDistributedOptimizer = true
	err := local.NewWorld(n, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		ps := toyParams()
		d, err := dp.New(ps, cfg, dp.Options{Group: g, BucketSize: 40})
		if err != nil {
			return err
		}
		o, err := NewDistributed([]dp.Wrapper{d}, opt, Options{ClipGrad: clip, FoundInf: g, Norm: []NormPart{{Group: g}}})
		if err != nil {
			return err
		}
		for it := range 3 {
			d.ZeroGradBuffer()
			for k, p := range ps {
				gd := p.Grad.Data()
				for i := range gd {
					gd[i] = toyGrad(it, g.Rank(), k, i)
				}
			}
			if err := d.FinishGradSync(ctx, false); err != nil {
				return err
			}
			ok, norm, err := Step(ctx, o, toyHyper)
			if err != nil || !ok {
				return fmt.Errorf("step %d: ok %v, %v", it, ok, err)
			}
			if e := math.Abs(norm-wantNorms[it]) / wantNorms[it]; e > 1e-12 {
				t.Errorf("rank %d step %d: norm %v, serial %v", g.Rank(), it, norm, wantNorms[it])
			}
		}
		for k, p := range ps {
			for i, v := range p.Value.Data() {
				w := want[k][i]
				if clip == 0 && v != w || math.Abs(float64(v-w)) > 1e-6*(1+math.Abs(float64(w))) {
					t.Errorf("rank %d: %s[%d] = %v, serial %v", g.Rank(), p.Name, i, v, w)
					return nil
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStepSkipsWhereAnyRankOverflows: with a loss scaler, an infinity in
// one rank's gradient makes every rank skip the update (the finding is
// agreed over FoundInf) and halves the dynamic scale everywhere; a NaN
// norm without a scaler is refused with ErrNonFiniteNorm.
func TestStepSkipsWhereAnyRankOverflows(t *testing.T) {
	err := local.NewWorld(2, comm.Options{Timeout: time.Minute}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		ps := toyParams()
		before := append([]float32(nil), ps[0].Value.Data()...)
		sc := DefaultDynamicScalerConfig()
		sc.Hysteresis = 1 // back off at the first overflow
		s, err := NewDynamicGradScaler(sc)
		if err != nil {
			return err
		}
		scale := s.Scale()
		o := NewPlain(ps, toyAdam, Options{Scaler: s, FoundInf: g, Norm: []NormPart{{Group: g}}})
		for k, p := range ps {
			gd := make([]float32, p.Value.Len())
			if k == 1 && g.Rank() == 1 {
				gd[3] = float32(math.Inf(1))
			}
			p.Grad = tensor.FromSlice(gd, p.Value.Shape()...)
		}
		ok, norm, err := Step(ctx, o, toyHyper)
		if err != nil || ok || !math.IsNaN(norm) {
			return fmt.Errorf("rank %d: Step = %v, %v, %v; want a skip", g.Rank(), ok, norm, err)
		}
		if s.Scale() != scale/2 || ps[0].Value.Data()[0] != before[0] {
			return fmt.Errorf("rank %d: scale %v (from %v), parameter moved: %v", g.Rank(), s.Scale(), scale, ps[0].Value.Data()[0] != before[0])
		}

		nan := NewPlain(toyParams(), toyAdam, Options{Norm: []NormPart{{}}})
		for _, p := range nan.Adam().Segments {
			gd := make([]float32, p.Len)
			gd[0] = float32(math.NaN())
			p.Param.Grad = tensor.FromSlice(gd, p.Param.Value.Shape()...)
		}
		if _, _, err := Step(ctx, nan, toyHyper); !errors.Is(err, ErrNonFiniteNorm) {
			return fmt.Errorf("rank %d: a NaN gradient: %v, want ErrNonFiniteNorm", g.Rank(), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
