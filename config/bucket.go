package config

// NoBucketing is the bucket size that means "no bucketing": each gradient
// buffer is one bucket, reduced in one collective. It is the reference's
// bucket_size = None after its DDP wrapper has run. (A resolved size of 0,
// which NumBuckets can give, is a real size: every parameter closes its own
// bucket.)
const NoBucketing = -1

// Default bucket-size terms, in elements (DECISIONS.md, "Default DDP bucket
// size"): max(MinDefaultBucketSize, BucketSizePerRank·dp·cp).
const (
	MinDefaultBucketSize = 40_000_000
	BucketSizePerRank    = 1_000_000
)

// EffectiveBucketSize returns the gradient bucket size, in elements, for a
// data-parallel reduction over dpcp = dp·cp ranks (the size of the group the
// buckets are reduced over):
//
//	NoBucketing (−1)                         if !OverlapGradReduce
//	BucketSize                               if set
//	max(40_000_000, 1_000_000·dpcp)          otherwise
//
// This is the reference's DDP-wrapper default with gotron's choice of dp·cp
// rather than dp (DECISIONS.md). The per-chunk and per-stage rules (no
// bucketing on pipeline ranks > 0 and on model chunks > 0) belong to the
// data-parallel wrapper.
//
// EffectiveBucketSize panics if NumBuckets is set, because the size then
// depends on the parameter count: a caller that can receive such a config
// must call ResolveBucketSize. It also panics if dpcp < 1. Both are
// programmer errors.
func (c DDPConfig) EffectiveBucketSize(dpcp int) int {
	if c.NumBuckets != 0 {
		panic("config: DDPConfig.EffectiveBucketSize called with num_buckets set; use ResolveBucketSize(dpcp, numParams)")
	}
	return c.ResolveBucketSize(dpcp, 0)
}

// ResolveBucketSize is EffectiveBucketSize with NumBuckets taken into
// account, as the reference's training layer resolves it
// (resolve_ddp_bucket_size):
//
//	NoBucketing (−1)                         if !OverlapGradReduce
//	numParams / NumBuckets (floor)           if NumBuckets set
//	BucketSize                               if set
//	max(40_000_000, 1_000_000·dpcp)          otherwise
//
// numParams is the number of trainable parameter elements of the model chunk
// being wrapped; it is read only when NumBuckets is set. A result of 0 from
// the NumBuckets branch (fewer elements than buckets) is kept, as in the
// reference: a bucket closes once it holds at least 0 elements, so every
// parameter gets a bucket of its own. It panics if dpcp < 1 (a programmer
// error).
func (c DDPConfig) ResolveBucketSize(dpcp, numParams int) int {
	if dpcp < 1 {
		panic("config: bucket size asked for a data-parallel group of fewer than 1 rank")
	}
	switch {
	case !c.OverlapGradReduce:
		return NoBucketing
	case c.NumBuckets > 0:
		return numParams / c.NumBuckets
	case c.BucketSize > 0:
		return c.BucketSize
	}
	return max(MinDefaultBucketSize, BucketSizePerRank*dpcp)
}
