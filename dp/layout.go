package dp

import (
	"fmt"

	"github.com/gotron/gotron/config"
)

// LayoutParam is what the buffer layout needs to know of a parameter.
type LayoutParam struct {
	Name  string
	Numel int
	// SharedEmbedding marks the word embedding tied across pipeline stages
	// (pipeline size > 1, on the first or the last stage): under the
	// distributed optimizer it gets a bucket of its own, so that both stages
	// shard it alike.
	SharedEmbedding bool
}

// ParamRange is a parameter's place in its buffer: elements [Start, End) of
// bucket Bucket.
type ParamRange struct {
	Start, End, Bucket int
}

// BucketRange is a bucket's place in its buffer: elements [Start, End), of
// which NumelUnpadded are parameters or alignment gaps before the end's
// padding, holding Params (indices into Layout.Params) in buffer order.
type BucketRange struct {
	Start, End    int
	NumelUnpadded int
	Params        []int
}

// Layout places a model chunk's parameters of one dtype in one contiguous
// buffer and cuts it into buckets (the reference's PerBufferParamLayout).
// Params are in the reference's registration order (named_parameters);
// the buffer holds them in reverse, roughly the order backward produces
// their gradients, so bucket 0 holds the model's last layers.
type Layout struct {
	Params  []LayoutParam
	Ranges  []ParamRange // one per parameter
	Buckets []BucketRange
	// Numel is the buffer's length; NumelUnpadded the sum of the buckets'
	// unpadded lengths. They are equal without the distributed optimizer.
	Numel, NumelUnpadded int
	// Shards is the number of distributed-optimizer shards every bucket
	// divides into (the data-parallel size), or 0 without it.
	Shards int
}

// DefaultLayout is the layout without the distributed optimizer
// (docs/SEMANTICS.md § DDP buffers and buckets): the parameters back to back
// in reverse order, no padding, a bucket closing as soon as it holds at least
// bucketSize elements. bucketSize config.NoBucketing (< 0) means one bucket;
// 0 means a bucket per parameter.
func DefaultLayout(params []LayoutParam, bucketSize int) Layout {
	l := Layout{Params: params, Ranges: make([]ParamRange, len(params))}
	start, bucketStart := 0, 0
	var members []int
	for i := len(params) - 1; i >= 0; i-- {
		end := start + params[i].Numel
		l.Ranges[i] = ParamRange{start, end, len(l.Buckets)}
		members = append(members, i)
		if bucketSize >= 0 && end-bucketStart >= bucketSize {
			l.Buckets = append(l.Buckets, BucketRange{bucketStart, end, end - bucketStart, members})
			bucketStart, members = end, nil
		}
		start = end
	}
	if len(members) > 0 {
		l.Buckets = append(l.Buckets, BucketRange{bucketStart, start, start - bucketStart, members})
	}
	l.Numel, l.NumelUnpadded = start, start
	return l
}

// ParamAlign is the element boundary every parameter starts on under the
// distributed optimizer (64 elements: 128 bytes of a 16-bit type).
const ParamAlign = 64

// BucketEndDivisor is what every bucket end is padded to a multiple of
// under the distributed optimizer: lcm(dp, 128), or lcm(dp, 128, 2¹⁶)
// with pad_buckets_for_high_nccl_busbw.
func BucketEndDivisor(dp int, padForBusBW bool) int {
	d := lcm(dp, 128)
	if padForBusBW {
		d = lcm(d, 1<<16)
	}
	return d
}

// DistOptLayout is the layout under the distributed optimizer
// (docs/SEMANTICS.md § DDP buffers and buckets): parameters in reverse order,
// each starting on a multiple of ParamAlign; a bucket closes once it holds
// bucketSize elements (as DefaultLayout), and its end is padded to
// BucketEndDivisor so that it splits into dp equal shards; a shared embedding
// is put in a bucket of its own (closing the bucket before it, if any). dp
// must be ≥ 1.
func DistOptLayout(params []LayoutParam, bucketSize, dp int, padForBusBW bool) Layout {
	if dp < 1 {
		panic(fmt.Sprintf("dp: DistOptLayout with %d shards", dp))
	}
	div := BucketEndDivisor(dp, padForBusBW)
	l := Layout{Params: params, Ranges: make([]ParamRange, len(params)), Shards: dp}
	start, bucketStart, end := 0, 0, 0
	var members []int
	finish := func(end int) int {
		b := BucketRange{Start: bucketStart, End: padTo(end, div), NumelUnpadded: end - bucketStart, Params: members}
		l.Buckets = append(l.Buckets, b)
		l.NumelUnpadded += b.NumelUnpadded
		members = nil
		return b.End
	}
	for i := len(params) - 1; i >= 0; i-- {
		p := params[i]
		start = padTo(start, ParamAlign)
		if p.SharedEmbedding && len(members) > 0 {
			bucketStart = finish(start)
			start = bucketStart
		}
		end = start + p.Numel
		l.Ranges[i] = ParamRange{start, end, len(l.Buckets)}
		members = append(members, i)
		if (bucketSize >= 0 && end-bucketStart >= bucketSize) || p.SharedEmbedding {
			bucketStart = finish(end)
			start = bucketStart
		} else {
			start = end
		}
	}
	if len(members) > 0 {
		finish(end)
	}
	if n := len(l.Buckets); n > 0 {
		l.Numel = l.Buckets[n-1].End
	}
	return l
}

// padTo rounds x up to a multiple of d.
func padTo(x, d int) int { return (x + d - 1) / d * d }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

// ShardParam is one parameter's part of a data-parallel rank's shard of a
// bucket (the reference's param range map entry): its elements in the
// whole buffer (GbufWorld), in the bucket (GbufWorldInBucket), in the
// rank's shard (GbufLocal) and in the flattened parameter (Param). Every
// range is [a, b).
type ShardParam struct {
	Param             int // index into Layout.Params
	GbufWorld         [2]int
	GbufWorldInBucket [2]int
	GbufLocal         [2]int
	ParamRange        [2]int
}

// BucketShard is a data-parallel rank's shard of one bucket: elements World
// of the buffer (n/dp of the bucket's n, padding included) and the pieces
// of the parameters that fall in it, in buffer order.
type BucketShard struct {
	Bucket int
	World  [2]int
	Params []ShardParam
}

// Shard returns rank r's shard of every bucket out of dp
// (docs/SEMANTICS.md § Distributed optimizer shards): bucket [o, o+n) gives
// rank r the world range [o + r·n/dp, o + (r+1)·n/dp); a parameter [s, e)
// overlapping it [ws, we) contributes
// local = [max(0, s−ws), min(we−ws, e−ws)) and param range
// [max(0, ws−s), max(0, ws−s) + |local|). Shards ignore parameter
// boundaries. Every bucket's length must divide by dp (DistOptLayout
// guarantees it); Shard returns an error naming the bucket otherwise.
func (l Layout) Shard(dp, r int) ([]BucketShard, error) {
	if dp < 1 || r < 0 || r >= dp {
		return nil, fmt.Errorf("dp: shard %d of %d", r, dp)
	}
	out := make([]BucketShard, len(l.Buckets))
	for b, bk := range l.Buckets {
		n := bk.End - bk.Start
		if n%dp != 0 {
			return nil, fmt.Errorf("dp: bucket %d holds %d elements, not divisible by the %d data-parallel ranks: use the distributed optimizer's layout (DistOptLayout)", b, n, dp)
		}
		m := n / dp
		ws, we := bk.Start+r*m, bk.Start+min(n, r*m+m)
		bs := BucketShard{Bucket: b, World: [2]int{ws, we}}
		for _, i := range bk.Params {
			s, e := l.Ranges[i].Start, l.Ranges[i].End
			if e <= ws || s >= we {
				continue
			}
			local := [2]int{max(0, s-ws), min(we-ws, e-ws)}
			p0 := max(0, ws-s)
			bs.Params = append(bs.Params, ShardParam{
				Param:             i,
				GbufWorld:         [2]int{local[0] + ws, local[1] + ws},
				GbufWorldInBucket: [2]int{local[0] + ws - bk.Start, local[1] + ws - bk.Start},
				GbufLocal:         local,
				ParamRange:        [2]int{p0, p0 + local[1] - local[0]},
			})
		}
		out[b] = bs
	}
	return out, nil
}

// BucketSize is the bucket size of model chunk `chunk` on pipeline rank
// ppRank for a data-parallel group of dpcp ranks (dp·cp) and a chunk of
// numParams elements: config.DDPConfig.ResolveBucketSize, except that, as
// the reference's wrapper (pipeline ranks > 0) and training layer (chunks
// > 0) do, only the first pipeline stage's first chunk is bucketed: the
// others get config.NoBucketing.
func BucketSize(cfg config.DDPConfig, dpcp, numParams, ppRank, chunk int) int {
	if ppRank > 0 || chunk > 0 {
		return config.NoBucketing
	}
	return cfg.ResolveBucketSize(dpcp, numParams)
}

// ChunkLayout lays out a model chunk's parameters (in registration order)
// as the data-parallel wrapper does: the distributed optimizer's layout,
// sharded over the dp·cp/instances ranks of one optimizer instance, when
// cfg.UseDistributedOptimizer, else the default layout.
func ChunkLayout(params []LayoutParam, cfg config.DDPConfig, dpcp, ppRank, chunk int) Layout {
	n := 0
	for _, p := range params {
		n += p.Numel
	}
	size := BucketSize(cfg, dpcp, n, ppRank, chunk)
	if !cfg.UseDistributedOptimizer {
		return DefaultLayout(params, size)
	}
	return DistOptLayout(params, size, dpcp/max(cfg.NumDistributedOptimizerInstances, 1), cfg.PadBucketsForHighNCCLBusBW)
}

// FSDPLayout is Megatron-FSDP's layout (dp.FSDP): a bucket per group — the
// units, then the groups that stay whole — its parameters back to back in
// the group's order, its end padded to a multiple of
// BucketEndDivisor(shards·outer, padForBusBW) so that it cuts into shards
// equal shards, each of which cuts again into outer equal pieces (the
// optimizer's under HFSDP, outer_dp_sharding_strategy optim; outer is 1
// otherwise). Params and Ranges follow the groups, flattened.
func FSDPLayout(groups [][]LayoutParam, shards, outer int, padForBusBW bool) Layout {
	l := Layout{Shards: shards}
	div := BucketEndDivisor(shards*max(outer, 1), padForBusBW)
	for b, g := range groups {
		br := BucketRange{Start: l.Numel}
		for _, p := range g {
			br.Params = append(br.Params, len(l.Params))
			l.Params = append(l.Params, p)
			l.Ranges = append(l.Ranges, ParamRange{Start: l.Numel + br.NumelUnpadded, End: l.Numel + br.NumelUnpadded + p.Numel, Bucket: b})
			br.NumelUnpadded += p.Numel
		}
		br.End = br.Start + padTo(max(br.NumelUnpadded, 1), div)
		l.Numel, l.NumelUnpadded = br.End, l.NumelUnpadded+br.NumelUnpadded
		l.Buckets = append(l.Buckets, br)
	}
	return l
}
