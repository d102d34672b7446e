package tp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// ltRank is what one rank of a layer test hands back.
type ltRank struct {
	master, w0       *tensor.Tensor // master weight kept for test, initial weight
	y, dx, dw, db    *tensor.Tensor
	outBias          *autograd.Var
	biasParam        *nn.Parameter
	weightParamCount int
	warnings         []string
}

// ltColCase is one ColumnParallelLinear configuration.
type ltColCase struct {
	name          string
	cfg           ColumnParallelConfig
	runtimeGather *bool
	passWeight    bool // SkipWeightParamAllocation: Forward gets the weight shard
	frozen        bool // the weight does not require a gradient
}

// ltBool returns a pointer to v.
func ltBool(v bool) *bool { return &v }

func TestColumnParallelLinear(t *testing.T) {
	cases := []ltColCase{
		{name: "gather", cfg: ColumnParallelConfig{Bias: true, GatherOutput: true}},
		{name: "no-gather", cfg: ColumnParallelConfig{Bias: true}},
		{name: "runtime-gather", cfg: ColumnParallelConfig{Bias: true}, runtimeGather: ltBool(true)},
		{name: "runtime-no-gather", cfg: ColumnParallelConfig{Bias: true, GatherOutput: true}, runtimeGather: ltBool(false)},
		{name: "no-bias", cfg: ColumnParallelConfig{GatherOutput: true}},
		{name: "sp", cfg: ColumnParallelConfig{Bias: true, SequenceParallel: true}},
		{name: "sp-gather", cfg: ColumnParallelConfig{Bias: true, SequenceParallel: true, GatherOutput: true}},
		{name: "skip-bias-add", cfg: ColumnParallelConfig{Bias: true, SkipBiasAdd: true}},
		{name: "stride3", cfg: ColumnParallelConfig{Bias: true, Stride: 3}},
		{name: "stride3-gather-sp", cfg: ColumnParallelConfig{Bias: true, Stride: 3, GatherOutput: true, SequenceParallel: true}},
		{name: "disable-grad-reduce", cfg: ColumnParallelConfig{Bias: true, DisableGradReduce: true}},
		{name: "expert", cfg: ColumnParallelConfig{Bias: true, IsExpert: true}},
		{name: "skip-weight-alloc", cfg: ColumnParallelConfig{Bias: true, SkipWeightParamAllocation: true, GatherOutput: true}, passWeight: true},
		{name: "frozen", cfg: ColumnParallelConfig{Bias: true}, frozen: true},
		{name: "frozen-sp", cfg: ColumnParallelConfig{Bias: true, SequenceParallel: true}, frozen: true},
	}
	for _, n := range []int{1, 2, 4} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("tp=%d/%s", n, c.name), func(t *testing.T) { ltCheckColumn(t, n, c) })
		}
	}
}

// ltCheckColumn runs case c on n ranks and compares with nn.Linear on the
// master weight. Everything is bitwise on one rank. With tp > 1:
//   - the bias gradient (a column sum over the same rows) and the replicated
//     results (all-reduced dX, gathered output) are bitwise;
//   - the output X·W_rᵀ and the weight gradient dY_rᵀ·X do not split their
//     reduction (k) dimension, but the GEMMs have other shapes than the
//     serial one (out/tp instead of out), and OpenBLAS's Haswell kernel
//     rounds some of them differently (observed: the output at tp = 2 and
//     4, the weight gradient at tp = 4, in the last bits; its Cooperlake
//     kernel is bitwise for both): within ltTol;
//   - the input gradient is a sum over the ranks' output features, all-
//     reduced: within ltTol.
func ltCheckColumn(t *testing.T, n int, c ltColCase) {
	x := randn(1, 1, ltS, ltB, ltIn)
	masterB := randn(2, 1, ltOut)
	dyFull := randn(3, 1, ltS, ltB, ltOut)
	master := tensor.New(ltOut, ltIn)
	ltInit(7)(master)
	stride := max(c.cfg.Stride, 1)
	gather := c.cfg.GatherOutput
	if c.runtimeGather != nil {
		gather = *c.runtimeGather
	}
	sp := c.cfg.SequenceParallel && n > 1
	last := 2
	res := make([]ltRank, n)
	runRanks(t, n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		r := g.Rank()
		cfg := c.cfg
		cfg.Group, cfg.Init, cfg.KeepMasterWeightForTest = g, ltInit(7), true
		l, err := NewColumnParallelLinear("decoder.linear_fc1", ltIn, ltOut, cfg)
		if err != nil {
			return err
		}
		out := &res[r]
		out.master, out.biasParam, out.warnings = l.MasterWeight, l.Bias, l.Warnings
		if l.Bias != nil {
			l.Bias.Value.CopyFrom(ltStrided(masterB, 0, stride, r, n))
		}
		var wv *autograd.Var
		if c.passWeight {
			wv = autograd.NewLeaf(ltStrided(master, 0, stride, r, n), "shared.weight", true)
		} else {
			wv = l.Weight.Var
			out.w0 = l.Weight.Value.Clone()
		}
		if c.frozen {
			wv.SetRequiresGrad(false)
		}
		out.weightParamCount = len(l.Parameters())
		xin := x.Clone()
		if sp {
			xin = ltShard(x, 0, r, n)
		}
		xv := autograd.NewLeaf(xin, "x", true)
		var y, ob *autograd.Var
		if c.passWeight {
			y, ob, err = l.Forward(tape, xv, wv, c.runtimeGather)
		} else {
			y, ob, err = l.Forward(tape, xv, nil, c.runtimeGather)
		}
		if err != nil {
			return err
		}
		// The output's features are the rank's strided chunks; gathered,
		// they are concatenated in rank order.
		dy := ltStrided(dyFull, last, stride, r, n)
		if gather {
			parts := make([]*tensor.Tensor, n)
			for k := range parts {
				parts[k] = ltStrided(dyFull, last, stride, k, n)
			}
			dy = tensor.Cat(last, parts...)
		}
		if err := autograd.Backward(tape, y, dy); err != nil {
			return err
		}
		out.y, out.dx, out.dw, out.outBias = y.Value, xv.Grad, wv.Grad, ob
		if l.Bias != nil {
			out.db = l.Bias.Grad
		}
		return nil
	})

	// The serial layer: bias added unless returned.
	var b *tensor.Tensor
	if c.cfg.Bias && !c.cfg.SkipBiasAdd {
		b = masterB
	}
	ys, dxs, dws, dbs := ltSerial(t, master, b, x, dyFull)

	for r := range res {
		if !c.passWeight {
			ltCompare(t, fmt.Sprintf("rank %d master weight", r), res[r].master, master, true)
			ltCompare(t, fmt.Sprintf("rank %d initial weight (master chunks rank::tp)", r), res[r].w0, ltStrided(master, 0, stride, r, n), true)
		}
		want := 0
		if !c.passWeight {
			want++
		}
		if c.cfg.Bias {
			want++
		}
		if res[r].weightParamCount != want {
			t.Errorf("rank %d: %d parameters, want %d", r, res[r].weightParamCount, want)
		}
		if c.cfg.SkipBiasAdd != (res[r].outBias != nil) || res[r].outBias != nil && res[r].outBias != res[r].biasParam.Var {
			t.Errorf("rank %d: returned bias %v with SkipBiasAdd %v", r, res[r].outBias, c.cfg.SkipBiasAdd)
		}
		if c.cfg.SequenceParallel && n == 1 && len(res[r].warnings) != 1 {
			t.Errorf("sequence parallel on one rank: warnings %q, want one", res[r].warnings)
		}
	}

	// Output.
	pieces := make([]*tensor.Tensor, n)
	for r := range res {
		if gather {
			ltCompare(t, fmt.Sprintf("rank %d gathered output", r), res[r].y, res[0].y, true)
			pieces[r] = ltShard(res[0].y, last, r, n)
		} else {
			pieces[r] = res[r].y
		}
	}
	ltCompare(t, "output", ltUnstrided(pieces, last, stride), ys, n == 1)

	// Input gradient.
	dxParts := make([]*tensor.Tensor, n)
	for r := range res {
		dxParts[r] = res[r].dx
	}
	var dx *tensor.Tensor
	switch {
	case sp:
		dx = tensor.Cat(0, dxParts...)
	case c.cfg.DisableGradReduce || c.cfg.IsExpert:
		// No reduction: each rank holds its partial dY_r·W_r.
		dx = ltSum(dxParts)
	default:
		for r := range res {
			ltCompare(t, fmt.Sprintf("rank %d input grad (all-reduced)", r), dxParts[r], dxParts[0], true)
		}
		dx = dxParts[0]
	}
	ltCompare(t, "input grad", dx, dxs, n == 1)

	// Weight and bias gradients.
	if c.frozen {
		for r := range res {
			if res[r].dw != nil || res[r].db != nil {
				t.Errorf("rank %d: frozen weight got a weight grad %v / bias grad %v", r, res[r].dw != nil, res[r].db != nil)
			}
		}
		return
	}
	dwParts, dbParts := make([]*tensor.Tensor, n), make([]*tensor.Tensor, n)
	for r := range res {
		dwParts[r], dbParts[r] = res[r].dw, res[r].db
	}
	ltCompare(t, "weight grad", ltUnstrided(dwParts, 0, stride), dws, n == 1)
	if !c.cfg.Bias {
		return
	}
	if c.cfg.SkipBiasAdd {
		for r := range res {
			if res[r].db != nil {
				t.Errorf("rank %d: the returned bias got a gradient inside the layer", r)
			}
		}
		return
	}
	ltCompare(t, "bias grad", ltUnstrided(dbParts, 0, stride), dbs, true)
}

// With stride 3 on two ranks, rank 1 holds the master rows of chunks 1,
// 3 and 5 of size 4: rows 4–7, 12–15 and 20–23 (the qkv interleaving).
func TestColumnParallelLinearStrideRows(t *testing.T) {
	master := tensor.New(ltOut, ltIn)
	ltInit(7)(master)
	rows := [2][]int{{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19}, {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23}}
	runRanks(t, 2, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		l, err := NewColumnParallelLinear("qkv", ltIn, ltOut, ColumnParallelConfig{Group: g, Init: ltInit(7), Stride: 3})
		if err != nil {
			return err
		}
		for i, mr := range rows[g.Rank()] {
			for j := 0; j < ltIn; j++ {
				if got, want := l.Weight.Value.At(i, j), master.At(mr, j); got != want {
					return fmt.Errorf("rank %d weight [%d, %d] = %v, want master [%d, %d] = %v", g.Rank(), i, j, got, mr, j, want)
				}
			}
		}
		if l.Weight.PartitionStride != 3 || l.Weight.PartitionDim != 0 || !l.Weight.TensorModelParallel {
			return fmt.Errorf("weight attributes %+v", *l.Weight)
		}
		return nil
	})
}

func TestColumnParallelLinearErrors(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		l, err := NewColumnParallelLinear("out", ltIn, ltOut, ColumnParallelConfig{Group: g, SkipWeightParamAllocation: true})
		if err != nil {
			return err
		}
		x := autograd.NewLeaf(randn(1, 1, ltS, ltB, ltIn), "x", true)
		if _, _, err := l.Forward(tape, x, nil, nil); err == nil || !strings.Contains(err.Error(), "no weight was passed to Forward and SkipWeightParamAllocation is set") {
			return fmt.Errorf("missing weight: got %v", err)
		}
		if tape.Err() == nil {
			return fmt.Errorf("missing weight: the tape holds no error")
		}
		tape.Reset()
		bad := autograd.NewLeaf(tensor.New(ltOut, ltIn), "w", true)
		if _, _, err := l.Forward(tape, x, bad, nil); err == nil || !strings.Contains(err.Error(), "supplied weight's shape is [24 12], not [12 12] as expected") {
			return fmt.Errorf("wrong weight shape: got %v", err)
		}
		tape.Reset()
		return nil
	})
	for _, c := range []struct {
		in, out int
		cfg     ColumnParallelConfig
		want    string
	}{
		{ltIn, 10, ColumnParallelConfig{Init: ltInit(1)}, "not divisible by the tensor-parallel size 4"},
		{ltIn, 8, ColumnParallelConfig{Init: ltInit(1), Stride: 3}, "not divisible by stride 3"},
		{ltIn, ltOut, ColumnParallelConfig{}, "Init is nil"},
	} {
		runRanks(t, 4, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
			cfg := c.cfg
			cfg.Group = g
			if _, err := NewColumnParallelLinear("l", c.in, c.out, cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				return fmt.Errorf("got %v, want an error containing %q", err, c.want)
			}
			return nil
		})
	}
}

// ltRowCase is one RowParallelLinear configuration.
type ltRowCase struct {
	name   string
	cfg    RowParallelConfig
	frozen bool
}

func TestRowParallelLinear(t *testing.T) {
	cases := []ltRowCase{
		{name: "input-parallel", cfg: RowParallelConfig{Bias: true, InputIsParallel: true}},
		{name: "input-not-parallel", cfg: RowParallelConfig{Bias: true}},
		{name: "no-bias", cfg: RowParallelConfig{InputIsParallel: true}},
		{name: "sp", cfg: RowParallelConfig{Bias: true, InputIsParallel: true, SequenceParallel: true}},
		{name: "skip-bias-add", cfg: RowParallelConfig{Bias: true, InputIsParallel: true, SkipBiasAdd: true}},
		{name: "stride3", cfg: RowParallelConfig{Bias: true, InputIsParallel: true, Stride: 3}},
		{name: "expert", cfg: RowParallelConfig{Bias: true, InputIsParallel: true, IsExpert: true, SkipBiasAdd: true}},
		{name: "frozen", cfg: RowParallelConfig{Bias: true}, frozen: true},
	}
	for _, n := range []int{1, 2, 4} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("tp=%d/%s", n, c.name), func(t *testing.T) { ltCheckRow(t, n, c) })
		}
	}
}

// ltCheckRow runs case c on n ranks and compares with nn.Linear on the
// master weight. Everything is bitwise on one rank. With tp > 1:
//   - the output is a sum of partial sums over in/tp (all-reduced or
//     reduce-scattered): within ltTol, as is a sequence-parallel bias
//     gradient (each rank sums its own rows);
//   - the input gradient dY·W_r and the weight gradient dYᵀ·X_r do not
//     split a reduction, but their GEMM shapes differ from the serial ones,
//     so bitwise equality depends on the BLAS kernel (it held with
//     OpenBLAS's Haswell and Cooperlake kernels): within ltTol;
//   - the non-SP bias gradient (the same column sum of the same dY on every
//     rank) and the replicated outputs are bitwise.
func ltCheckRow(t *testing.T, n int, c ltRowCase) {
	x := randn(1, 1, ltS, ltB, ltIn)
	masterB := randn(2, 1, ltOut)
	dyFull := randn(3, 1, ltS, ltB, ltOut)
	master := tensor.New(ltOut, ltIn)
	ltInit(7)(master)
	stride := max(c.cfg.Stride, 1)
	sp := c.cfg.SequenceParallel && n > 1
	expert := c.cfg.IsExpert && n > 1
	last := 2
	res := make([]ltRank, n)
	runRanks(t, n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		r := g.Rank()
		cfg := c.cfg
		cfg.Group, cfg.Init, cfg.KeepMasterWeightForTest = g, ltInit(7), true
		l, err := NewRowParallelLinear("decoder.linear_fc2", ltIn, ltOut, cfg)
		if err != nil {
			return err
		}
		out := &res[r]
		out.master, out.biasParam, out.w0 = l.MasterWeight, l.Bias, l.Weight.Value.Clone()
		out.weightParamCount = len(l.Parameters())
		if l.Bias != nil {
			l.Bias.Value.CopyFrom(masterB)
		}
		if c.frozen {
			l.Weight.SetRequiresGrad(false)
		}
		xin := x.Clone()
		if c.cfg.InputIsParallel {
			// A parallel input comes in the weight's (strided) column order.
			xin = ltStrided(x, last, stride, r, n)
		}
		xv := autograd.NewLeaf(xin, "x", true)
		y, ob, err := l.Forward(tape, xv)
		if err != nil {
			return err
		}
		dy := dyFull
		if sp {
			dy = ltShard(dyFull, 0, r, n)
		}
		if err := autograd.Backward(tape, y, dy); err != nil {
			return err
		}
		out.y, out.dx, out.dw, out.outBias = y.Value, xv.Grad, l.Weight.Grad, ob
		if l.Bias != nil {
			out.db = l.Bias.Grad
		}
		return nil
	})

	var b *tensor.Tensor
	if c.cfg.Bias && !c.cfg.SkipBiasAdd {
		b = masterB
	}
	ys, dxs, dws, dbs := ltSerial(t, master, b, x, dyFull)

	for r := range res {
		ltCompare(t, fmt.Sprintf("rank %d master weight", r), res[r].master, master, true)
		ltCompare(t, fmt.Sprintf("rank %d initial weight (master column chunks rank::tp)", r), res[r].w0, ltStrided(master, 1, stride, r, n), true)
		want := 1
		if c.cfg.Bias {
			want = 2
			if res[r].biasParam.SequenceParallel != c.cfg.SequenceParallel || res[r].biasParam.TensorModelParallel {
				t.Errorf("rank %d: bias attributes %+v", r, *res[r].biasParam)
			}
		}
		if res[r].weightParamCount != want {
			t.Errorf("rank %d: %d parameters, want %d", r, res[r].weightParamCount, want)
		}
		if (c.cfg.SkipBiasAdd && c.cfg.Bias) != (res[r].outBias != nil) {
			t.Errorf("rank %d: returned bias %v with SkipBiasAdd %v", r, res[r].outBias, c.cfg.SkipBiasAdd)
		}
	}

	// Output.
	ys0 := make([]*tensor.Tensor, n)
	for r := range res {
		ys0[r] = res[r].y
	}
	switch {
	case sp:
		ltCompare(t, "output (reduce-scattered)", tensor.Cat(0, ys0...), ys, n == 1)
	case expert:
		ltCompare(t, "output (sum of unreduced partial sums)", ltSum(ys0), ys, false)
	default:
		for r := range res {
			ltCompare(t, fmt.Sprintf("rank %d output (all-reduced)", r), ys0[r], ys0[0], true)
		}
		ltCompare(t, "output", ys0[0], ys, n == 1)
	}

	// Input gradient.
	dxParts := make([]*tensor.Tensor, n)
	for r := range res {
		dxParts[r] = res[r].dx
	}
	if c.cfg.InputIsParallel {
		ltCompare(t, "input grad", ltUnstrided(dxParts, last, stride), dxs, n == 1)
	} else {
		for r := range res {
			ltCompare(t, fmt.Sprintf("rank %d input grad (all-gathered)", r), dxParts[r], dxs, n == 1)
		}
	}

	// Weight and bias gradients.
	if c.frozen {
		for r := range res {
			if res[r].dw != nil {
				t.Errorf("rank %d: frozen weight got a gradient", r)
			}
		}
	} else {
		dwParts := make([]*tensor.Tensor, n)
		for r := range res {
			dwParts[r] = res[r].dw
		}
		ltCompare(t, "weight grad", ltUnstrided(dwParts, 1, stride), dws, n == 1)
	}
	if !c.cfg.Bias {
		return
	}
	if c.cfg.SkipBiasAdd {
		for r := range res {
			if res[r].db != nil {
				t.Errorf("rank %d: the returned bias got a gradient inside the layer", r)
			}
		}
		return
	}
	if sp {
		// Each rank sums its own rows; finalize_model_grads all-reduces.
		dbParts := make([]*tensor.Tensor, n)
		for r := range res {
			dbParts[r] = res[r].db
		}
		ltCompare(t, "bias grad (summed over ranks)", ltSum(dbParts), dbs, false)
		return
	}
	for r := range res {
		ltCompare(t, fmt.Sprintf("rank %d bias grad", r), res[r].db, dbs, true)
	}
}

func TestRowParallelLinearErrors(t *testing.T) {
	for _, c := range []struct {
		n    int
		cfg  RowParallelConfig
		want string
	}{
		{1, RowParallelConfig{Init: ltInit(1), SequenceParallel: true}, "To enable `sequence_parallel`, `input_is_parallel` must be `True`"},
		{2, RowParallelConfig{Init: ltInit(1), InputIsParallel: true, IsExpert: true, Bias: true}, "set SkipBiasAdd"},
		{4, RowParallelConfig{Init: ltInit(1), Stride: 2}, "not divisible by stride 2"},
		{2, RowParallelConfig{}, "Init is nil"},
		{2, RowParallelConfig{Init: ltInit(1), Stride: 3}, "stride 3 with input_is_parallel false"},
	} {
		runRanks(t, c.n, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
			cfg := c.cfg
			cfg.Group = g
			if _, err := NewRowParallelLinear("l", ltIn, ltOut, cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				return fmt.Errorf("got %v, want an error containing %q", err, c.want)
			}
			return nil
		})
	}
}

// Parameter attributes: split dims and strides, SP bias, and the expert
// rule Allreduce = ¬(IsExpert ∧ (EP > 1 ∨ ETP ≠ TP)).
func TestParallelLinearAttributes(t *testing.T) {
	runRanks(t, 2, func(ctx context.Context, g comm.Group, tape *autograd.Tape) error {
		col, err := NewColumnParallelLinear("c", ltIn, ltOut, ColumnParallelConfig{Group: g, Init: ltInit(1), Bias: true, Stride: 2})
		if err != nil {
			return err
		}
		for _, p := range col.Parameters() {
			if !p.TensorModelParallel || p.PartitionDim != 0 || p.PartitionStride != 2 || !p.Allreduce || p.SequenceParallel {
				return fmt.Errorf("column %s: %+v", p.Name, *p)
			}
		}
		if col.Weight.Name != "c.weight" || col.Bias.Name != "c.bias" || !col.AllreduceDgrad || col.ExplicitExpertComm {
			return fmt.Errorf("column: names %q %q, AllreduceDgrad %v", col.Weight.Name, col.Bias.Name, col.AllreduceDgrad)
		}
		row, err := NewRowParallelLinear("r", ltIn, ltOut, RowParallelConfig{Group: g, Init: ltInit(1), Bias: true, InputIsParallel: true, SequenceParallel: true})
		if err != nil {
			return err
		}
		if w := row.Weight; !w.TensorModelParallel || w.PartitionDim != 1 || w.PartitionStride != 1 || !w.Allreduce {
			return fmt.Errorf("row weight: %+v", *w)
		}
		if b := row.Bias; b.TensorModelParallel || !b.SequenceParallel || !b.Allreduce {
			return fmt.Errorf("row bias: %+v", *b)
		}
		for _, c := range []struct {
			ep, denseTP int
			allreduce   bool
		}{{0, 0, true}, {2, 0, false}, {1, 4, false}, {1, 2, true}} {
			e, err := NewColumnParallelLinear("e", ltIn, ltOut, ColumnParallelConfig{Group: g, Init: ltInit(1), Bias: true, IsExpert: true, ExpertModelParallelSize: c.ep, TensorModelParallelSize: c.denseTP})
			if err != nil {
				return err
			}
			if e.Weight.Allreduce != c.allreduce || e.Bias.Allreduce != c.allreduce || !e.ExplicitExpertComm {
				return fmt.Errorf("expert column ep=%d tp=%d: allreduce %v, want %v", c.ep, c.denseTP, e.Weight.Allreduce, c.allreduce)
			}
			re, err := NewRowParallelLinear("e", ltIn, ltOut, RowParallelConfig{Group: g, Init: ltInit(1), Bias: true, SkipBiasAdd: true, InputIsParallel: true, IsExpert: true, ExpertModelParallelSize: c.ep, TensorModelParallelSize: c.denseTP})
			if err != nil {
				return err
			}
			if re.Weight.Allreduce != c.allreduce || re.Bias.Allreduce != c.allreduce {
				return fmt.Errorf("expert row ep=%d tp=%d: allreduce %v, want %v", c.ep, c.denseTP, re.Weight.Allreduce, c.allreduce)
			}
		}
		return nil
	})
}

// AddBias against a plain loop, and its bias gradient accumulates.
func TestAddBias(t *testing.T) {
	x := randn(1, 1, ltS, ltB, ltOut)
	b := randn(2, 1, ltOut)
	dy := randn(3, 1, ltS, ltB, ltOut)
	tape := autograd.NewTape(context.Background())
	xv := autograd.NewLeaf(x.Clone(), "x", true)
	bv := autograd.NewLeaf(b.Clone(), "b", true)
	for range 2 {
		y := AddBias(tape, xv, bv)
		for i, v := range y.Value.Data() {
			if want := x.Data()[i] + b.Data()[i%ltOut]; v != want {
				t.Fatalf("y[%d] = %v, want %v", i, v, want)
			}
		}
		if err := autograd.Backward(tape, y, dy); err != nil {
			t.Fatal(err)
		}
	}
	wantDB := make([]float32, ltOut)
	for pass := 0; pass < 2; pass++ {
		var once [ltOut]float64
		for i, v := range dy.Data() {
			once[i%ltOut] += float64(v)
		}
		for j := range wantDB {
			wantDB[j] = float32(float64(wantDB[j]) + once[j])
		}
	}
	numtest.SameBits(t, "bias grad", bv.Grad.Data(), wantDB)
	twice := dy.Clone()
	twice.Scale(2)
	numtest.SameBits(t, "input grad", xv.Grad.Data(), twice.Data())
	bad := AddBias(autograd.NewTape(context.Background()), xv, autograd.NewLeaf(tensor.New(3), "b", true))
	if bad.Value != nil {
		t.Fatal("a bias of the wrong width was accepted")
	}
}
