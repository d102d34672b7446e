package tp

import (
	"fmt"

	"github.com/gotron/gotron/autograd"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// ColumnParallelConfig holds the options of a ColumnParallelLinear, named
// as Megatron-Core's ColumnParallelLinear arguments (docs/SEMANTICS.md
// § Column- and row-parallel linear layers). The zero value of each field is
// "off"; note that Bias defaults to false here (true in the reference).
type ColumnParallelConfig struct {
	// Group is the tensor-parallel group the output dimension is split
	// over (the expert tensor-parallel group for an expert layer); nil
	// means one rank.
	Group comm.Group
	// Init fills the whole master weight [out, in]; every rank draws it
	// whole and keeps its slices (InitializeAffineWeightCPU). Required
	// unless SkipInitialization or SkipWeightParamAllocation is set.
	Init InitMethod
	// SkipInitialization leaves the weight zero (Megatron's
	// perform_initialization = False), e.g. before a checkpoint is loaded.
	SkipInitialization bool
	// Bias adds a bias [out/tp], initialised to zero.
	Bias bool
	// GatherOutput all-gathers the output along the last dimension,
	// [..., out/tp] → [..., out] (overridden per call by Forward's
	// runtimeGatherOutput).
	GatherOutput bool
	// SkipBiasAdd returns the bias from Forward instead of adding it, for
	// the caller to fuse into a later element-wise operation.
	SkipBiasAdd bool
	// SkipWeightParamAllocation allocates no weight: Forward must be given
	// one of shape [out/tp, in] (the output layer sharing the word
	// embedding's weight).
	SkipWeightParamAllocation bool
	// Stride interleaves the partition: the master weight's rows are cut
	// into tp·Stride chunks and a rank keeps chunks rank, rank+tp, … (a
	// fused QKV projection uses 3). 0 means 1.
	Stride int
	// KeepMasterWeightForTest keeps the whole initial master weight in
	// MasterWeight.
	KeepMasterWeightForTest bool
	// IsExpert marks an MoE expert layer: with tp > 1 or
	// ExpertModelParallelSize > 1 the token dispatcher does the
	// communication, so the input gradient is neither all-reduced nor
	// reduce-scattered here (explicit_expert_comm).
	IsExpert bool
	// ExpertModelParallelSize is the expert-parallel size (0 or 1: none);
	// used only with IsExpert.
	ExpertModelParallelSize int
	// TensorModelParallelSize is the dense tensor-parallel size, used only
	// with IsExpert: when it differs from Group's size (the expert
	// tensor-parallel size) or ExpertModelParallelSize > 1, the parameters'
	// gradients are reduced over the expert data-parallel group
	// (Parameter.Allreduce = false). 0 means Group's size.
	TensorModelParallelSize int
	// DisableGradReduce leaves the input gradient unreduced across the
	// tensor-parallel ranks (each rank returns its partial dY·W), for a
	// caller that reduces it later with other gradients.
	DisableGradReduce bool
	// SequenceParallel takes the input as [s/tp, b, in] shards, all-gathers
	// it along dim 0 before the GEMM and reduce-scatters the input gradient.
	// On one rank it is turned off with a warning (see Warnings).
	SequenceParallel bool
	// SerialComm turns off the overlap of the input-gradient collectives
	// with the weight-gradient GEMM (LinearOptions.SerialComm), for
	// measurement.
	SerialComm bool
	// UnfusedWeightGrad computes the weight gradient into a fresh product
	// added to the gradient afterwards (Megatron's config with
	// gradient_accumulation_fusion false; LinearOptions.UnfusedWeightGrad).
	// The zero value fuses.
	UnfusedWeightGrad bool
}

// ColumnParallelLinear is Y = X·Aᵀ + b with A [out, in] split along its
// output dimension: this rank holds A_r [out/tp, in] and b_r [out/tp] and
// computes Y_r = X·A_rᵀ + b_r [..., out/tp] (docs/SEMANTICS.md § Column- and
// row-parallel linear layers).
type ColumnParallelLinear struct {
	// Name prefixes the parameters' names (Name + ".weight", ".bias").
	Name string
	// InputSize and OutputSize are the whole layer's sizes; the rank holds
	// OutputSizePerPartition = OutputSize/tp output features.
	InputSize, OutputSize, OutputSizePerPartition int
	// Weight is A_r [out/tp, in] (TensorModelParallel, PartitionDim 0,
	// PartitionStride Stride); nil with SkipWeightParamAllocation.
	Weight *nn.Parameter
	// Bias is b_r [out/tp] (split as the weight), or nil.
	Bias *nn.Parameter
	// MasterWeight is the whole initial weight [out, in] with
	// KeepMasterWeightForTest, else nil.
	MasterWeight *tensor.Tensor
	// GatherOutput and SkipBiasAdd are as configured.
	GatherOutput, SkipBiasAdd bool
	// SequenceParallel is the configured value, turned off on one rank.
	SequenceParallel bool
	// AllreduceDgrad = tp > 1 ∧ ¬SequenceParallel ∧ ¬DisableGradReduce: the
	// input gradient is all-reduced in backward.
	AllreduceDgrad bool
	// DisableGradReduce is as configured.
	DisableGradReduce bool
	// ExplicitExpertComm = IsExpert ∧ (tp > 1 ∨ EP > 1).
	ExplicitExpertComm bool
	// Warnings holds the advice given at construction (sequence
	// parallelism turned off on one rank); gotron has no global logger, so
	// the caller logs them.
	Warnings []string

	group      comm.Group
	serialComm bool
	unfused    bool // UnfusedWeightGrad
}

// NewColumnParallelLinear builds the rank's part of a column-parallel
// linear layer of inputSize → outputSize features; outputSize must be
// divisible by the size of cfg.Group and outputSize/tp by the stride.
func NewColumnParallelLinear(name string, inputSize, outputSize int, cfg ColumnParallelConfig) (*ColumnParallelLinear, error) {
	ws, rank := worldSize(cfg.Group), rankOf(cfg.Group)
	stride := cfg.Stride
	if stride == 0 {
		stride = 1
	}
	switch {
	case inputSize <= 0 || outputSize <= 0:
		return nil, fmt.Errorf("tp: column parallel linear %q: sizes %d → %d must be positive", name, inputSize, outputSize)
	case stride < 0:
		return nil, fmt.Errorf("tp: column parallel linear %q: stride %d must be positive", name, cfg.Stride)
	case outputSize%ws != 0:
		return nil, fmt.Errorf("tp: column parallel linear %q: output size %d is not divisible by the tensor-parallel size %d; choose sizes divisible by it", name, outputSize, ws)
	case (outputSize/ws)%stride != 0:
		return nil, fmt.Errorf("tp: column parallel linear %q: the partition size %d (output size %d / tensor-parallel size %d) is not divisible by stride %d", name, outputSize/ws, outputSize, ws, stride)
	case cfg.Init == nil && !cfg.SkipInitialization && !cfg.SkipWeightParamAllocation:
		return nil, fmt.Errorf("tp: column parallel linear %q: ColumnParallelConfig.Init is nil; give an InitMethod, or set SkipInitialization to leave the weight zero", name)
	}
	ep := max(cfg.ExpertModelParallelSize, 1)
	denseTP := cfg.TensorModelParallelSize
	if denseTP == 0 {
		denseTP = ws
	}
	useExpertPGs := cfg.IsExpert && (ep > 1 || denseTP != ws)
	l := &ColumnParallelLinear{
		Name:                   name,
		InputSize:              inputSize,
		OutputSize:             outputSize,
		OutputSizePerPartition: outputSize / ws,
		GatherOutput:           cfg.GatherOutput,
		SkipBiasAdd:            cfg.SkipBiasAdd,
		SequenceParallel:       cfg.SequenceParallel,
		DisableGradReduce:      cfg.DisableGradReduce,
		ExplicitExpertComm:     cfg.IsExpert && (ws > 1 || ep > 1),
		group:                  cfg.Group,
		serialComm:             cfg.SerialComm,
		unfused:                cfg.UnfusedWeightGrad,
	}
	if !cfg.SkipWeightParamAllocation {
		var err error
		l.Weight, l.MasterWeight, err = partitionedWeight(name, outputSize, inputSize, 0, stride, rank, ws, cfg.Init, cfg.SkipInitialization, cfg.KeepMasterWeightForTest)
		if err != nil {
			return nil, fmt.Errorf("tp: column parallel linear %q: %w", name, err)
		}
		l.Weight.Allreduce = !useExpertPGs
	}
	if cfg.Bias {
		l.Bias = nn.NewParameter(name+".bias", tensor.New(l.OutputSizePerPartition))
		l.Bias.TensorModelParallel, l.Bias.PartitionDim, l.Bias.PartitionStride = true, 0, stride
		l.Bias.Allreduce = !useExpertPGs
	}
	if l.SequenceParallel && ws <= 1 {
		l.Warnings = append(l.Warnings, fmt.Sprintf("column parallel linear %q: sequence parallelism is set but the tensor-parallel size is %d; sequence parallelism is disabled for this layer", name, ws))
		l.SequenceParallel = false
	}
	l.AllreduceDgrad = ws > 1 && !l.SequenceParallel && !l.DisableGradReduce
	if l.AllreduceDgrad && l.SequenceParallel {
		// Unreachable by construction; kept as the reference's invariant.
		return nil, fmt.Errorf("tp: column parallel linear %q: AllreduceDgrad and SequenceParallel cannot be enabled at the same time", name)
	}
	return l, nil
}

// Parameters returns the weight (when allocated) and the bias (when
// present), in that order.
func (l *ColumnParallelLinear) Parameters() []*nn.Parameter {
	var ps []*nn.Parameter
	if l.Weight != nil {
		ps = append(ps, l.Weight)
	}
	if l.Bias != nil {
		ps = append(ps, l.Bias)
	}
	return ps
}

// Forward computes the rank's output columns. Shapes, with tp the group
// size:
//
//	x   [s, b, in] (any leading dims), or [s/tp, b, in] under sequence parallelism
//	out [s, b, out/tp], or [s, b, out] when the output is gathered
//
// weight is nil to use the layer's own weight; it must be given, of shape
// [out/tp, in], with SkipWeightParamAllocation. runtimeGatherOutput, when
// non-nil, overrides GatherOutput for this call. With SkipBiasAdd the bias
// [out/tp] is returned as bias (and not added); otherwise bias is nil.
//
// The input is used as is when AllreduceDgrad, SequenceParallel,
// ExplicitExpertComm or DisableGradReduce is set (the linear core does the
// input-gradient communication, or none is wanted), and passes through
// CopyToTensorModelParallelRegion otherwise. A weight that does not
// require a gradient runs LinearWithFrozenWeight. A bfloat16 or float16
// weight and bias follow LinearWithGradAccumulationAndAsyncAllreduce's
// mixed-precision rules (the input rounded once and kept, and under
// sequence parallelism gathered, in 16 bits; float32 output).
//
// Errors are also recorded on the tape.
func (l *ColumnParallelLinear) Forward(t *autograd.Tape, x, weight *autograd.Var, runtimeGatherOutput *bool) (out, bias *autograd.Var, err error) {
	if weight == nil {
		if l.Weight == nil {
			err := fmt.Errorf("tp: column parallel linear %q: no weight was passed to Forward and SkipWeightParamAllocation is set; pass the weight [%d, %d]", l.Name, l.OutputSizePerPartition, l.InputSize)
			t.Fail(err)
			return &autograd.Var{}, nil, err
		}
		weight = l.Weight.Var
	} else if weight.Value != nil {
		if s := weight.Value.Shape(); len(s) != 2 || s[0] != l.OutputSizePerPartition || s[1] != l.InputSize {
			err := fmt.Errorf("tp: column parallel linear %q: supplied weight's shape is %v, not [%d %d] as expected ([out/tp, in])", l.Name, s, l.OutputSizePerPartition, l.InputSize)
			t.Fail(err)
			return &autograd.Var{}, nil, err
		}
	}
	var b *autograd.Var
	if l.Bias != nil && !l.SkipBiasAdd {
		b = l.Bias.Var
	}
	in := x
	if !(l.AllreduceDgrad || l.SequenceParallel || l.ExplicitExpertComm || l.DisableGradReduce) {
		in = CopyToTensorModelParallelRegion(t, x, l.group)
	}
	opts := LinearOptions{
		AllreduceDgrad:    l.AllreduceDgrad && !l.ExplicitExpertComm,
		SequenceParallel:  l.SequenceParallel && !l.ExplicitExpertComm,
		Group:             l.group,
		FrozenWeight:      !weight.RequiresGrad(),
		SerialComm:        l.serialComm,
		UnfusedWeightGrad: l.unfused,
	}
	out = LinearWithGradAccumulationAndAsyncAllreduce(t, in, weight, b, opts)
	gather := l.GatherOutput
	if runtimeGatherOutput != nil {
		gather = *runtimeGatherOutput
	}
	if gather {
		out = GatherFromTensorModelParallelRegion(t, out, l.group)
	}
	if l.Bias != nil && l.SkipBiasAdd {
		bias = l.Bias.Var
	}
	return out, bias, t.Err()
}

// RowParallelConfig holds the options of a RowParallelLinear, named as
// Megatron-Core's RowParallelLinear arguments (docs/SEMANTICS.md § Column-
// and row-parallel linear layers). Bias defaults to false here.
type RowParallelConfig struct {
	// Group is the tensor-parallel group the input dimension is split over
	// (the expert tensor-parallel group for an expert layer); nil means
	// one rank.
	Group comm.Group
	// Init fills the whole master weight [out, in]; required unless
	// SkipInitialization is set.
	Init InitMethod
	// SkipInitialization leaves the weight zero (perform_initialization =
	// False).
	SkipInitialization bool
	// Bias adds a bias [out], not split, initialised to zero, after the
	// partial outputs are reduced.
	Bias bool
	// InputIsParallel says the input is already split along its last
	// dimension, [..., in/tp]; otherwise the layer keeps its own chunk of a
	// whole input [..., in] (ScatterToTensorModelParallelRegion).
	InputIsParallel bool
	// SkipBiasAdd returns the bias from Forward instead of adding it.
	SkipBiasAdd bool
	// Stride interleaves the partition of the input dimension (see
	// ColumnParallelConfig.Stride). 0 means 1.
	Stride int
	// KeepMasterWeightForTest keeps the whole initial master weight in
	// MasterWeight.
	KeepMasterWeightForTest bool
	// IsExpert marks an MoE expert layer: with tp > 1 or
	// ExpertModelParallelSize > 1 the partial sums are returned unreduced
	// for the token dispatcher (explicit_expert_comm), which requires
	// SkipBiasAdd.
	IsExpert bool
	// ExpertModelParallelSize and TensorModelParallelSize are as in
	// ColumnParallelConfig.
	ExpertModelParallelSize, TensorModelParallelSize int
	// SequenceParallel reduce-scatters the output along dim 0,
	// [s, b, out] → [s/tp, b, out], instead of all-reducing it; it requires
	// InputIsParallel. The bias is then marked SequenceParallel so that
	// finalize_model_grads all-reduces its gradient over the group.
	SequenceParallel bool
	// UnfusedWeightGrad computes the weight gradient into a fresh product
	// added to the gradient afterwards (Megatron's config with
	// gradient_accumulation_fusion false; LinearOptions.UnfusedWeightGrad).
	// The zero value fuses.
	UnfusedWeightGrad bool
}

// RowParallelLinear is Y = X·Aᵀ + b with A [out, in] split along its input
// dimension: this rank holds A_r [out, in/tp], computes the partial sum
// X_r·A_rᵀ from its input chunk X_r [..., in/tp], and the partial sums are
// reduced over the group before the (unsplit) bias b [out] is added
// (docs/SEMANTICS.md § Column- and row-parallel linear layers).
type RowParallelLinear struct {
	// Name prefixes the parameters' names.
	Name string
	// InputSize and OutputSize are the whole layer's sizes; the rank holds
	// InputSizePerPartition = InputSize/tp input features.
	InputSize, OutputSize, InputSizePerPartition int
	// Weight is A_r [out, in/tp] (TensorModelParallel, PartitionDim 1,
	// PartitionStride Stride).
	Weight *nn.Parameter
	// Bias is b [out] (not split; SequenceParallel as the layer), or nil.
	Bias *nn.Parameter
	// MasterWeight is the whole initial weight [out, in] with
	// KeepMasterWeightForTest, else nil.
	MasterWeight *tensor.Tensor
	// InputIsParallel, SkipBiasAdd and SequenceParallel are as configured.
	InputIsParallel, SkipBiasAdd, SequenceParallel bool
	// ExplicitExpertComm = IsExpert ∧ (tp > 1 ∨ EP > 1).
	ExplicitExpertComm bool

	group   comm.Group
	unfused bool // UnfusedWeightGrad
}

// NewRowParallelLinear builds the rank's part of a row-parallel linear
// layer of inputSize → outputSize features; inputSize must be divisible by
// the size of cfg.Group and inputSize/tp by the stride.
func NewRowParallelLinear(name string, inputSize, outputSize int, cfg RowParallelConfig) (*RowParallelLinear, error) {
	ws, rank := worldSize(cfg.Group), rankOf(cfg.Group)
	stride := cfg.Stride
	if stride == 0 {
		stride = 1
	}
	ep := max(cfg.ExpertModelParallelSize, 1)
	explicit := cfg.IsExpert && (ws > 1 || ep > 1)
	switch {
	case cfg.SequenceParallel && !cfg.InputIsParallel:
		return nil, fmt.Errorf("tp: row parallel linear %q: To enable `sequence_parallel`, `input_is_parallel` must be `True`", name)
	case inputSize <= 0 || outputSize <= 0:
		return nil, fmt.Errorf("tp: row parallel linear %q: sizes %d → %d must be positive", name, inputSize, outputSize)
	case stride < 0:
		return nil, fmt.Errorf("tp: row parallel linear %q: stride %d must be positive", name, cfg.Stride)
	case inputSize%ws != 0:
		return nil, fmt.Errorf("tp: row parallel linear %q: input size %d is not divisible by the tensor-parallel size %d; choose sizes divisible by it", name, inputSize, ws)
	case (inputSize/ws)%stride != 0:
		return nil, fmt.Errorf("tp: row parallel linear %q: the partition size %d (input size %d / tensor-parallel size %d) is not divisible by stride %d", name, inputSize/ws, inputSize, ws, stride)
	case cfg.Init == nil && !cfg.SkipInitialization:
		return nil, fmt.Errorf("tp: row parallel linear %q: RowParallelConfig.Init is nil; give an InitMethod, or set SkipInitialization to leave the weight zero", name)
	case explicit && !cfg.SkipBiasAdd:
		return nil, fmt.Errorf("tp: row parallel linear %q: an expert layer with tensor- or expert-parallel size > 1 returns unreduced partial sums, so the bias cannot be added here; set SkipBiasAdd", name)
	case stride > 1 && ws > 1 && !cfg.InputIsParallel:
		return nil, fmt.Errorf("tp: row parallel linear %q: stride %d with input_is_parallel false: the weight holds strided input columns but scattering the input gives each rank a contiguous chunk, so the product would be wrong; give the input already split with the same stride (InputIsParallel) or use stride 1", name, stride)
	}
	denseTP := cfg.TensorModelParallelSize
	if denseTP == 0 {
		denseTP = ws
	}
	useExpertPGs := cfg.IsExpert && (ep > 1 || denseTP != ws)
	l := &RowParallelLinear{
		Name:                  name,
		InputSize:             inputSize,
		OutputSize:            outputSize,
		InputSizePerPartition: inputSize / ws,
		InputIsParallel:       cfg.InputIsParallel,
		SkipBiasAdd:           cfg.SkipBiasAdd,
		SequenceParallel:      cfg.SequenceParallel,
		ExplicitExpertComm:    explicit,
		group:                 cfg.Group,
		unfused:               cfg.UnfusedWeightGrad,
	}
	var err error
	l.Weight, l.MasterWeight, err = partitionedWeight(name, outputSize, inputSize, 1, stride, rank, ws, cfg.Init, cfg.SkipInitialization, cfg.KeepMasterWeightForTest)
	if err != nil {
		return nil, fmt.Errorf("tp: row parallel linear %q: %w", name, err)
	}
	l.Weight.Allreduce = !useExpertPGs
	if cfg.Bias {
		l.Bias = nn.NewParameter(name+".bias", tensor.New(outputSize))
		l.Bias.Allreduce = !useExpertPGs
		l.Bias.SequenceParallel = cfg.SequenceParallel
	}
	return l, nil
}

// Parameters returns the weight and the bias (when present), in that order.
func (l *RowParallelLinear) Parameters() []*nn.Parameter {
	ps := []*nn.Parameter{l.Weight}
	if l.Bias != nil {
		ps = append(ps, l.Bias)
	}
	return ps
}

// Forward computes Y = Σ_r X_r·A_rᵀ (+ b). Shapes, with tp the group size:
//
//	x   [s, b, in/tp] with InputIsParallel, else [s, b, in] (any leading dims)
//	out [s, b, out]; under sequence parallelism [s/tp, b, out] (s divisible by tp)
//
// The partial sums are reduce-scattered along dim 0 under sequence
// parallelism, all-reduced otherwise, and returned unreduced for an
// expert layer with ExplicitExpertComm. The bias [out] is then added,
// or returned as bias with SkipBiasAdd (bias is nil otherwise). A weight
// that does not require a gradient runs LinearWithFrozenWeight. A bfloat16
// or float16 weight follows LinearWithGradAccumulationAndAsyncAllreduce's
// mixed-precision rules, so the partial sums reduced here are float32; a
// 16-bit bias is widened (AddBias).
//
// Errors are also recorded on the tape.
func (l *RowParallelLinear) Forward(t *autograd.Tape, x *autograd.Var) (out, bias *autograd.Var, err error) {
	in := x
	if !l.InputIsParallel {
		in = ScatterToTensorModelParallelRegion(t, x, l.group)
	}
	opts := LinearOptions{Group: l.group, FrozenWeight: !l.Weight.RequiresGrad(), UnfusedWeightGrad: l.unfused}
	partial := LinearWithGradAccumulationAndAsyncAllreduce(t, in, l.Weight.Var, nil, opts)
	switch {
	case l.ExplicitExpertComm:
		out = partial
	case l.SequenceParallel:
		out = ReduceScatterToSequenceParallelRegion(t, partial, l.group, nil)
	default:
		out = ReduceFromTensorModelParallelRegion(t, partial, l.group)
	}
	if l.Bias != nil {
		if l.SkipBiasAdd {
			bias = l.Bias.Var
		} else {
			out = AddBias(t, out, l.Bias.Var)
		}
	}
	return out, bias, t.Err()
}

// partitionedWeight returns this rank's partition of a master weight
// [out, in] split along dim over ws ranks with the given stride, as the
// tensor-parallel parameter name+".weight", initialised by init
// (InitializeAffineWeightCPU) unless skip leaves it zero; the master weight
// is returned too when keep is set.
func partitionedWeight(name string, out, in, dim, stride, rank, ws int, init InitMethod, skip, keep bool) (*nn.Parameter, *tensor.Tensor, error) {
	shape := []int{out, in}
	shape[dim] /= ws
	w := tensor.New(shape...)
	var master *tensor.Tensor
	if !skip {
		var err error
		if master, err = InitializeAffineWeightCPU(w, out, in, shape[dim], dim, init, stride, rank, ws, keep); err != nil {
			return nil, nil, err
		}
	}
	p := nn.NewParameter(name+".weight", w)
	p.TensorModelParallel, p.PartitionDim, p.PartitionStride = true, dim, stride
	return p, master, nil
}

// AddBias returns y = x + b with b [n] broadcast over the rows of x
// [..., n]. Backward passes dy to x and accumulates db = Σ_rows dy straight
// into b's Grad (nn.AccumulateGrad, kernels.ColumnSumInto), so b must be a
// leaf parameter when it requires a gradient. A bfloat16 or float16 b is
// widened (exactly); x, y and dy are float32, and the column sum is
// accumulated into a 16-bit Grad with one rounding per element.
func AddBias(t *autograd.Tape, x, b *autograd.Var) *autograd.Var {
	return autograd.Apply(t, addBiasFn{b: b}, x, b)
}

// addBiasFn is the Function behind AddBias; inputs (x, b).
type addBiasFn struct{ b *autograd.Var }

// Forward implements autograd.Function.
func (f addBiasFn) Forward(c *autograd.Ctx, in ...*tensor.Tensor) (*tensor.Tensor, error) {
	x, b := in[0], in[1]
	if f.b.RequiresGrad() {
		if err := nn.CheckParam(f.b, "bias"); err != nil {
			return nil, err
		}
	}
	if x.Rank() < 1 || b.Rank() != 1 || b.Dim(0) != x.Dim(-1) {
		return nil, fmt.Errorf("tp: add bias %q: bias has shape %v, input %v; want bias [n] for input [..., n]", f.b.Name, b.Shape(), x.Shape())
	}
	x = x.Contiguous()
	bd := b.Float32().Contiguous().Data()
	n := b.Dim(0)
	y := tensor.Empty(x.Shape()...)
	xd, yd := x.Data(), y.Data()
	for r := 0; r < leadingRows(x.Shape()); r++ {
		kernels.Add(yd[r*n:(r+1)*n], xd[r*n:(r+1)*n], bd)
	}
	return y, nil
}

// Backward implements autograd.Function.
func (f addBiasFn) Backward(c *autograd.Ctx, dy *tensor.Tensor) ([]*tensor.Tensor, error) {
	grads := make([]*tensor.Tensor, 2)
	if c.NeedsGrad(0) {
		grads[0] = dy
	}
	if c.NeedsGrad(1) {
		n, rows := dy.Dim(-1), leadingRows(dy.Shape())
		nn.AccumulateGrad(c, f.b, func(dst []float32) { kernels.ColumnSumInto(dst, dy.Data(), rows, n) })
	}
	return grads, nil
}
