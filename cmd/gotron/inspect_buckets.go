package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/dp"
	"github.com/gotron/gotron/models/gpt"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/train"
)

// bucketsFlags are the settings of `gotron inspect buckets`: gotron
// train's model, parallel and DDP flags (in args), and the command's own.
type bucketsFlags struct {
	args     train.Args
	model    *modelFlags // reads the model-option flags into args.Model
	dataPar  int         // --data-parallel-size
	pipeRank int         // --pipeline-rank
	asJSON   bool
	// numLayers, worldSet and dataParSet record whether --num-layers (else
	// taken from a layout), --world-size and --data-parallel-size were
	// given.
	numLayers, worldSet, dataParSet bool
}

// chunkBuffer is one model chunk's gradient buffer on the inspected
// pipeline rank: the chunk, the bucket size it was laid out with, and the
// layout.
type chunkBuffer struct {
	chunk      config.PipelineChunk
	bucketSize int
	layout     dp.Layout
	units      int // under Megatron-FSDP: the buckets that are decoder layers (the first units)
}

// bucketsReport is what the command prints: the buffers of one pipeline
// rank. dp is the size of the group they are reduced over, dp·cp with cp
// the context-parallel size.
type bucketsReport struct {
	pipeRank, pipeSize int
	dp, cp, world      int
	ddp                config.DDPConfig
	dtype              tensor.DType
	buffers            []chunkBuffer
}

func newInspectBucketsCmd() *cobra.Command {
	f := bucketsFlags{args: train.DefaultArgs(), dataPar: 1}
	f.args.Model.VocabSize = 256
	cmd := &cobra.Command{
		Use:   "buckets",
		Short: "Print a pipeline rank's gradient buffers, their buckets and each data-parallel rank's shard",
		Long: `buckets lays out the data-parallel gradient buffers of one pipeline rank
(--pipeline-rank) as gotron's data-parallel wrapper does
(docs/SEMANTICS.md § DDP buffers and buckets, § Distributed optimizer
shards): one buffer per model chunk, in chunk order, holding the chunk's
parameters in reverse registration order, cut into buckets. It prints each
bucket's element range and its parameters' ranges.

Buckets: without --overlap-grad-reduce a buffer is one bucket; with it, a
bucket closes once it holds --ddp-bucket-size elements (default
max(40000000, 1000000·dp·cp)), or the chunk's elements / --ddp-num-buckets,
and only pipeline rank 0's first chunk is bucketed.

With --use-distributed-optimizer each bucket splits into
shards = dp·cp / --num-distributed-optimizer-instances equal parts:
parameters start on multiples of 64 elements, every bucket end is padded to
a multiple of lcm(shards, 128) (and of 2¹⁶ with
--ddp-pad-buckets-for-high-nccl-busbw), and the tied word embedding of a
pipelined model gets a bucket of its own. The command prints every
data-parallel rank's shard of every bucket (world range, and each parameter
piece's gbuf_local and param_range). Without the distributed optimizer
there are no shards: the table prints none and the JSON has "shards": [].

With --use-megatron-fsdp and a sharded strategy (optim_grads,
optim_grads_params) it prints Megatron-FSDP's units instead: a bucket per
decoder layer, then the word embedding tied across pipeline stages alone,
then the other parameters, each in registration order, parameters back to
back, every bucket padded to a multiple of lcm(shards, 128) (of
lcm(dp·cp, 128) under --outer-dp-sharding-strategy optim) and split into
shards = dp·cp / --num-distributed-optimizer-instances equal parts, with
every rank's shard as above. A MoE model's expert units are not printed.

The data-parallel size is --data-parallel-size, or --world-size /
(--tensor-model-parallel-size × --pipeline-model-parallel-size ×
--context-parallel-size); the buckets are reduced over dp × cp ranks. The
buffers' dtype is their gradients' type: float32, or with --bf16
--grad-reduce-in-bf16 bfloat16, with --fp16 float16 (unless
--accumulate-allreduce-grads-in-fp32).
The flags gotron train takes and the layout does not depend on are accepted
and validated as there.

--json prints {"buffers": [{"dtype", "numel", "numel_unpadded", "buckets":
[{"start", "end", "numel_unpadded", "params": [{"name", "start", "end"}]}]}],
"shards": [{"dp_rank", "buckets": [{"world_range": [a, b], "params":
[{"name", "gbuf_local": [a, b], "param_range": [a, b]}]}]}]}, where each
rank's "buckets" runs over every buffer's buckets, buffer by buffer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			f.numLayers, f.worldSet, f.dataParSet = fl.Changed("num-layers"), fl.Changed("world-size"), fl.Changed("data-parallel-size")
			if err := f.model.apply(); err != nil {
				return err
			}
			if err := ddpFlags(cmd, &f.args); err != nil {
				return err
			}
			r, err := f.report()
			if err != nil {
				return err
			}
			if f.asJSON {
				return writeBucketsJSON(cmd.OutOrStdout(), r)
			}
			return writeBucketsTable(cmd.OutOrStdout(), r)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	f.model = addModelFlags(fl, &f.args.Model)
	addParallelFlags(fl, &f.args)
	fl.IntVar(&f.dataPar, "data-parallel-size", 1, "data-parallel size dp (with --world-size: must equal world / (tp × pp × cp))")
	fl.IntVar(&f.pipeRank, "pipeline-rank", 0, "the pipeline rank whose buffers to print")
	fl.BoolVar(&f.asJSON, "json", false, `print JSON: {"buffers": [...], "shards": [{"dp_rank", "buckets": [...]}]} ("shards": [] without the distributed optimizer)`)
	return cmd
}

// report validates the settings and lays out the pipeline rank's buffers.
func (f *bucketsFlags) report() (bucketsReport, error) {
	resolved := f.args.ResolvePrecision()
	m, ddp := resolved.Model, resolved.DDP
	ddp.Finalize()
	if ddp.ShardsGradients() && m.NumMoEExperts > 0 {
		return bucketsReport{}, fmt.Errorf("--data-parallel-sharding-strategy %s with --num-experts: inspect buckets prints a dense model's Megatron-FSDP units; a MoE chunk's experts (an FSDP of their own over expert-DP) are not printed", ddp.DataParallelShardingStrategy)
	}
	if s := m.PipelineModelParallelLayout; s != "" && !f.numLayers {
		if l, err := config.ParsePipelineLayout(s, 1); err == nil {
			m.NumLayers = l.Count(config.LayerDecoder)
		}
	}
	// The settings gotron train derives before validating: virtual stages
	// from a layout, pipeline messages in the parameters' type, overlapped
	// (unbatched) pipeline communication with the interleaved schedule.
	m = m.ResolvePipelineLayout()
	if m.PipelineModelParallelSize > 1 {
		if m.PipelineDType == config.DTypeNone {
			m.PipelineDType = m.ParamsDType
		}
		m.OverlapP2PComm = m.Interleaved()
		m.BatchP2PComm = !m.OverlapP2PComm
	}
	dpSize, world, err := f.sizes(m.ModelParallelConfig)
	if err != nil {
		return bucketsReport{}, err
	}
	if err := validateBuckets(m, ddp, world, f.pipeRank); err != nil {
		return bucketsReport{}, err
	}
	chunks, err := m.PipelineChunks()
	if err != nil {
		return bucketsReport{}, err
	}
	dpcp := dpSize * m.ContextParallelSize
	r := bucketsReport{pipeRank: f.pipeRank, pipeSize: len(chunks), dp: dpcp, cp: m.ContextParallelSize, world: world, ddp: ddp, dtype: dp.GradDTypeFor(resolved.ParamDType(), ddp.GradReduceInFP32)}
	for v, ch := range chunks[f.pipeRank] {
		specs, err := gpt.ChunkParamSpecs(m, m.TensorModelParallelSize, gpt.SpecOf(ch))
		if err != nil {
			return bucketsReport{}, err
		}
		params := make([]dp.LayoutParam, len(specs))
		n := 0
		for i, s := range specs {
			params[i] = dp.LayoutParam{Name: s.Name, Numel: s.Numel(), SharedEmbedding: s.SharedEmbedding}
			n += s.Numel()
		}
		if ddp.ShardsGradients() {
			groups, units := fsdpLayoutGroups(specs)
			inner, outer := dp.FSDPShards(ddp, dpcp)
			r.buffers = append(r.buffers, chunkBuffer{chunk: ch, bucketSize: config.NoBucketing, units: units,
				layout: dp.FSDPLayout(groups, inner, outer, ddp.PadBucketsForHighNCCLBusBW)})
			continue
		}
		r.buffers = append(r.buffers, chunkBuffer{
			chunk:      ch,
			bucketSize: dp.BucketSize(ddp, dpcp, n, f.pipeRank, v),
			layout:     dp.ChunkLayout(params, ddp, dpcp, f.pipeRank, v),
		})
	}
	return r, nil
}

// sizes returns the data-parallel size and the world size: dp from
// --data-parallel-size and world = tp·pp·cp·dp, or, with --world-size,
// dp = world/(tp·pp·cp) (which must agree with --data-parallel-size when
// both are given).
func (f *bucketsFlags) sizes(mp config.ModelParallelConfig) (dpSize, world int, err error) {
	if !f.worldSet {
		if f.dataPar < 1 {
			return 0, 0, fmt.Errorf("--data-parallel-size %d: must be at least 1", f.dataPar)
		}
		return f.dataPar, mp.TensorModelParallelSize * mp.PipelineModelParallelSize * mp.ContextParallelSize * f.dataPar, nil
	}
	world = f.args.WorldSize
	if dpSize, err = mp.DataParallelSize(world); err != nil {
		return 0, 0, err
	}
	if f.dataParSet && f.dataPar != dpSize {
		return 0, 0, fmt.Errorf("--data-parallel-size %d disagrees with --world-size %d, which gives world / (tp·pp·cp) = %d / (%d·%d·%d) = %d: give one of the two",
			f.dataPar, world, world, mp.TensorModelParallelSize, mp.PipelineModelParallelSize, mp.ContextParallelSize, dpSize)
	}
	return dpSize, world, nil
}

// validateBuckets checks m and ddp with the config package's rules (the
// model with its parallel config, the DDP config and their combination,
// then the world), and the pipeline rank, returning one error that lists
// every broken rule of the first stage that fails.
func validateBuckets(m config.TransformerConfig, ddp config.DDPConfig, world, pipeRank int) error {
	var vs []config.Violation
	seen := map[string]bool{}
	add := func(err error) {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			for _, v := range ve.Violations {
				if !seen[v.Msg] {
					seen[v.Msg] = true
					vs = append(vs, v)
				}
			}
		} else if err != nil {
			vs = append(vs, config.Violation{Msg: err.Error()})
		}
	}
	add(m.Validate())
	add(config.ValidateTogether(m.ModelParallelConfig, ddp, m.CalculatePerTokenLoss))
	if p := m.PipelineModelParallelSize; p >= 1 && (pipeRank < 0 || pipeRank >= p) {
		vs = append(vs, config.Violation{Fields: []string{"pipeline_rank"},
			Msg: fmt.Sprintf("--pipeline-rank %d: the pipeline ranks are 0 to %d (pipeline_model_parallel_size %d)", pipeRank, p-1, p)})
	}
	if len(vs) == 0 {
		add(config.ValidateWorld(world, m.ModelParallelConfig, ddp))
	}
	return config.NewValidationError(vs)
}

// bucketsJSON is the --json document: every buffer of the pipeline rank in
// chunk order, and each data-parallel rank's shard of every bucket, buffer
// by buffer (none without the distributed optimizer).
type bucketsJSON struct {
	Buffers []bufferJSON     `json:"buffers"`
	Shards  []rankShardsJSON `json:"shards"`
}

type bufferJSON struct {
	DType         string       `json:"dtype"`
	Numel         int          `json:"numel"`
	NumelUnpadded int          `json:"numel_unpadded"`
	Buckets       []bucketJSON `json:"buckets"`
}

type bucketJSON struct {
	Start         int             `json:"start"`
	End           int             `json:"end"`
	NumelUnpadded int             `json:"numel_unpadded"`
	Params        []paramSpanJSON `json:"params"`
}

type paramSpanJSON struct {
	Name  string `json:"name"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

type rankShardsJSON struct {
	DPRank  int               `json:"dp_rank"`
	Buckets []bucketShardJSON `json:"buckets"`
}

type bucketShardJSON struct {
	WorldRange [2]int           `json:"world_range"`
	Params     []shardPieceJSON `json:"params"`
}

type shardPieceJSON struct {
	Name       string `json:"name"`
	GbufLocal  [2]int `json:"gbuf_local"`
	ParamRange [2]int `json:"param_range"`
}

// shardOf returns data-parallel rank q's shard of every bucket of l: shard
// q mod s out of the s = l.Shards ranks of q's optimizer instance (ranks
// q, q+s, q+2s, … of different instances hold the same shard).
func shardOf(l dp.Layout, q int) ([]dp.BucketShard, error) {
	return l.Shard(l.Shards, q%l.Shards)
}

// fsdpLayoutGroups is gpt.FSDPGroups of a chunk's parameters as
// dp.FSDPLayout takes them, and the number of units.
func fsdpLayoutGroups(specs []gpt.ParamSpec) ([][]dp.LayoutParam, int) {
	groups, units := gpt.FSDPGroups(specs)
	out := make([][]dp.LayoutParam, len(groups))
	for i, g := range groups {
		for _, s := range g {
			out[i] = append(out[i], dp.LayoutParam{Name: s.Name, Numel: s.Numel(), SharedEmbedding: s.SharedEmbedding})
		}
	}
	return out, units
}
