package dp

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gotron/gotron/config"
)

// layoutFixture is one dp/testdata/layout/*.json file, written by
// tools/torchref/bucket_layout_ref.py from the rules of docs/SEMANTICS.md
// § DDP buffers and buckets and § Distributed optimizer shards, independently
// of this package: the case's inputs and the layout and shards the rules
// give.
type layoutFixture struct {
	Inputs struct {
		Params []struct {
			Name            string `json:"name"`
			Numel           int    `json:"numel"`
			SharedEmbedding bool   `json:"shared_embedding"`
		} `json:"params"`
		BucketSize              *int `json:"bucket_size"` // null: no bucketing
		DP                      int  `json:"dp"`
		UseDistributedOptimizer bool `json:"use_distributed_optimizer"`
		PadForBusBW             bool `json:"pad_buckets_for_high_nccl_busbw"`
	} `json:"inputs"`
	layoutDoc
}

// layoutDoc is the result part of a fixture; layoutDocOf builds the same
// document from a Layout.
type layoutDoc struct {
	Numel         int           `json:"numel"`
	NumelUnpadded int           `json:"numel_unpadded"`
	Buckets       []docBucket   `json:"buckets"`
	Shards        []docRankPart `json:"shards"`
}

type docBucket struct {
	Start         int        `json:"start"`
	End           int        `json:"end"`
	NumelUnpadded int        `json:"numel_unpadded"`
	Params        []docRange `json:"params"`
}

type docRange struct {
	Name  string `json:"name"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

type docRankPart struct {
	DPRank  int              `json:"dp_rank"`
	Buckets []docBucketShard `json:"buckets"`
}

type docBucketShard struct {
	WorldRange [2]int     `json:"world_range"`
	Params     []docPiece `json:"params"`
}

type docPiece struct {
	Name              string `json:"name"`
	GbufWorld         [2]int `json:"gbuf_world"`
	GbufWorldInBucket [2]int `json:"gbuf_world_in_bucket"`
	GbufLocal         [2]int `json:"gbuf_local"`
	ParamRange        [2]int `json:"param_range"`
}

// layoutDocOf describes l as the reference script does, with every rank's
// shard out of dp when l is a distributed-optimizer layout.
func layoutDocOf(l Layout, dp int) (layoutDoc, error) {
	d := layoutDoc{Numel: l.Numel, NumelUnpadded: l.NumelUnpadded, Buckets: []docBucket{}, Shards: []docRankPart{}}
	for _, b := range l.Buckets {
		db := docBucket{Start: b.Start, End: b.End, NumelUnpadded: b.NumelUnpadded, Params: []docRange{}}
		for _, i := range b.Params {
			db.Params = append(db.Params, docRange{l.Params[i].Name, l.Ranges[i].Start, l.Ranges[i].End})
		}
		d.Buckets = append(d.Buckets, db)
	}
	if l.Shards == 0 {
		return d, nil
	}
	for r := 0; r < dp; r++ {
		shards, err := l.Shard(dp, r)
		if err != nil {
			return d, err
		}
		part := docRankPart{DPRank: r, Buckets: []docBucketShard{}}
		for _, s := range shards {
			ds := docBucketShard{WorldRange: s.World, Params: []docPiece{}}
			for _, p := range s.Params {
				ds.Params = append(ds.Params, docPiece{l.Params[p.Param].Name, p.GbufWorld, p.GbufWorldInBucket, p.GbufLocal, p.ParamRange})
			}
			part.Buckets = append(part.Buckets, ds)
		}
		d.Shards = append(d.Shards, part)
	}
	return d, nil
}

// TestLayoutMatchesReference runs DefaultLayout or DistOptLayout, and Shard
// for every rank, on each fixture's inputs and compares the whole result.
// Regenerate the fixtures with /usr/bin/python3
// tools/torchref/bucket_layout_ref.py.
func TestLayoutMatchesReference(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "layout", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/layout (%v): run /usr/bin/python3 tools/torchref/bucket_layout_ref.py", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var fx layoutFixture
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&fx); err != nil {
				t.Fatal(err)
			}
			in := fx.Inputs
			params := make([]LayoutParam, len(in.Params))
			for i, p := range in.Params {
				params[i] = LayoutParam{Name: p.Name, Numel: p.Numel, SharedEmbedding: p.SharedEmbedding}
			}
			size := config.NoBucketing
			if in.BucketSize != nil {
				size = *in.BucketSize
			}
			var l Layout
			if in.UseDistributedOptimizer {
				l = DistOptLayout(params, size, in.DP, in.PadForBusBW)
			} else {
				l = DefaultLayout(params, size)
			}
			got, err := layoutDocOf(l, in.DP)
			if err != nil {
				t.Fatal(err)
			}
			compareDocs(t, got, fx.layoutDoc)
		})
	}
}

// compareDocs reports the first difference between got and want, naming
// the bucket or the rank's bucket shard.
func compareDocs(t *testing.T, got, want layoutDoc) {
	t.Helper()
	if got.Numel != want.Numel || got.NumelUnpadded != want.NumelUnpadded {
		t.Errorf("numel %d, numel_unpadded %d; reference %d, %d", got.Numel, got.NumelUnpadded, want.Numel, want.NumelUnpadded)
	}
	if len(got.Buckets) != len(want.Buckets) {
		t.Fatalf("%d buckets, reference %d:\n got %+v\nwant %+v", len(got.Buckets), len(want.Buckets), got.Buckets, want.Buckets)
	}
	for b := range got.Buckets {
		if !reflect.DeepEqual(got.Buckets[b], want.Buckets[b]) {
			t.Errorf("bucket %d:\n got %+v\nwant %+v", b, got.Buckets[b], want.Buckets[b])
		}
	}
	if len(got.Shards) != len(want.Shards) {
		t.Fatalf("shards of %d ranks, reference %d", len(got.Shards), len(want.Shards))
	}
	for r := range got.Shards {
		g, w := got.Shards[r], want.Shards[r]
		if g.DPRank != w.DPRank || len(g.Buckets) != len(w.Buckets) {
			t.Fatalf("rank entry %d: rank %d with %d buckets, reference rank %d with %d", r, g.DPRank, len(g.Buckets), w.DPRank, len(w.Buckets))
		}
		for b := range g.Buckets {
			if !reflect.DeepEqual(g.Buckets[b], w.Buckets[b]) {
				t.Errorf("rank %d bucket %d:\n got %+v\nwant %+v", w.DPRank, b, g.Buckets[b], w.Buckets[b])
			}
		}
	}
}

// threeParams are a (100 elements), b (10) and c (1000) in registration
// order; every buffer holds them in reverse: c, b, a.
func threeParams() []LayoutParam {
	return []LayoutParam{{Name: "a", Numel: 100}, {Name: "b", Numel: 10}, {Name: "c", Numel: 1000}}
}

// TestDistOptLayoutByHand works the distributed-optimizer layout of
// threeParams over dp = 2 by hand. Parameters start on multiples of 64,
// bucket ends are padded to lcm(2, 128) = 128:
//
//	c: [0, 1000)
//	b: start pad(1000, 64) = 1024, [1024, 1034)
//	a: start pad(1034, 64) = 1088, [1088, 1188)
//	one bucket: unpadded 1188, end pad(1188, 128) = 10·128 = 1280
//
// Its shards are 1280/2 = 640 elements: rank 0 holds [0, 640), all of it
// c's elements [0, 640); rank 1 holds [640, 1280): c's [640, 1000) at local
// [0, 360), b at local [1024−640, 1034−640) = [384, 394) and a at local
// [448, 548), the rest padding.
//
// With bucket size 1000, c fills a bucket alone (1000 − 0 ≥ 1000): bucket 0
// is [0, pad(1000, 128) = 1024) with 1000 unpadded; b and a follow as
// before, 1188 − 1024 = 164 < 1000, so bucket 1 is [1024, 1280) with 164
// unpadded.
func TestDistOptLayoutByHand(t *testing.T) {
	l := DistOptLayout(threeParams(), config.NoBucketing, 2, false)
	wantRanges := []ParamRange{{1088, 1188, 0}, {1024, 1034, 0}, {0, 1000, 0}}
	if !reflect.DeepEqual(l.Ranges, wantRanges) {
		t.Errorf("ranges %v, want %v", l.Ranges, wantRanges)
	}
	wantBuckets := []BucketRange{{Start: 0, End: 1280, NumelUnpadded: 1188, Params: []int{2, 1, 0}}}
	if !reflect.DeepEqual(l.Buckets, wantBuckets) || l.Numel != 1280 || l.NumelUnpadded != 1188 || l.Shards != 2 {
		t.Errorf("buckets %+v, numel %d, unpadded %d, shards %d", l.Buckets, l.Numel, l.NumelUnpadded, l.Shards)
	}
	want := [][]BucketShard{
		{{Bucket: 0, World: [2]int{0, 640}, Params: []ShardParam{
			{Param: 2, GbufWorld: [2]int{0, 640}, GbufWorldInBucket: [2]int{0, 640}, GbufLocal: [2]int{0, 640}, ParamRange: [2]int{0, 640}},
		}}},
		{{Bucket: 0, World: [2]int{640, 1280}, Params: []ShardParam{
			{Param: 2, GbufWorld: [2]int{640, 1000}, GbufWorldInBucket: [2]int{640, 1000}, GbufLocal: [2]int{0, 360}, ParamRange: [2]int{640, 1000}},
			{Param: 1, GbufWorld: [2]int{1024, 1034}, GbufWorldInBucket: [2]int{1024, 1034}, GbufLocal: [2]int{384, 394}, ParamRange: [2]int{0, 10}},
			{Param: 0, GbufWorld: [2]int{1088, 1188}, GbufWorldInBucket: [2]int{1088, 1188}, GbufLocal: [2]int{448, 548}, ParamRange: [2]int{0, 100}},
		}}},
	}
	for r := range want {
		got, err := l.Shard(2, r)
		if err != nil || !reflect.DeepEqual(got, want[r]) {
			t.Errorf("rank %d: %+v, %v\nwant %+v", r, got, err, want[r])
		}
	}

	l = DistOptLayout(threeParams(), 1000, 2, false)
	wantBuckets = []BucketRange{{0, 1024, 1000, []int{2}}, {1024, 1280, 164, []int{1, 0}}}
	if !reflect.DeepEqual(l.Buckets, wantBuckets) || l.Numel != 1280 || l.NumelUnpadded != 1164 {
		t.Errorf("bucket size 1000: buckets %+v, numel %d, unpadded %d", l.Buckets, l.Numel, l.NumelUnpadded)
	}
	if got := []int{l.Ranges[0].Bucket, l.Ranges[1].Bucket, l.Ranges[2].Bucket}; !slices.Equal(got, []int{1, 1, 0}) {
		t.Errorf("bucket size 1000: buckets of a, b, c %v, want [1 1 0]", got)
	}
	// Rank 1's shard of bucket 1 is [1152, 1280): only a's elements
	// [1152−1088, 1188−1088) = [64, 100), at local [0, 36).
	s, err := l.Shard(2, 1)
	if err != nil || len(s[1].Params) != 1 || s[1].World != [2]int{1152, 1280} ||
		s[1].Params[0].ParamRange != [2]int{64, 100} || s[1].Params[0].GbufLocal != [2]int{0, 36} || s[1].Params[0].GbufWorldInBucket != [2]int{128, 164} {
		t.Errorf("bucket size 1000, rank 1: %+v, %v", s, err)
	}
}

// TestBucketSizeZero: a bucket closes once it holds ≥ 0 elements, so every
// parameter has a bucket of its own. Without the distributed optimizer the
// buckets are c [0, 1000), b [1000, 1010), a [1010, 1110); with it (dp 2)
// each end is padded to 128: [0, 1024), [1024, 1152), [1152, 1280).
func TestBucketSizeZero(t *testing.T) {
	l := DefaultLayout(threeParams(), 0)
	want := []BucketRange{{0, 1000, 1000, []int{2}}, {1000, 1010, 10, []int{1}}, {1010, 1110, 100, []int{0}}}
	if !reflect.DeepEqual(l.Buckets, want) || l.Numel != 1110 || l.NumelUnpadded != 1110 || l.Shards != 0 {
		t.Errorf("default: %+v, numel %d/%d, shards %d", l.Buckets, l.Numel, l.NumelUnpadded, l.Shards)
	}
	l = DistOptLayout(threeParams(), 0, 2, false)
	want = []BucketRange{{0, 1024, 1000, []int{2}}, {1024, 1152, 10, []int{1}}, {1152, 1280, 100, []int{0}}}
	if !reflect.DeepEqual(l.Buckets, want) || l.Numel != 1280 || l.NumelUnpadded != 1110 {
		t.Errorf("distopt: %+v, numel %d/%d", l.Buckets, l.Numel, l.NumelUnpadded)
	}
}

// TestNoBucketing: config.NoBucketing (and any size above the buffer) gives
// one bucket of everything, c b a back to back without the distributed
// optimizer; with padForBusBW the one distopt bucket ends at lcm(2, 128,
// 2¹⁶) = 65536.
func TestNoBucketing(t *testing.T) {
	want := []BucketRange{{0, 1110, 1110, []int{2, 1, 0}}}
	for _, size := range []int{config.NoBucketing, 1110 + 1, 1 << 40} {
		if l := DefaultLayout(threeParams(), size); !reflect.DeepEqual(l.Buckets, want) {
			t.Errorf("size %d: %+v, want %+v", size, l.Buckets, want)
		}
	}
	l := DistOptLayout(threeParams(), config.NoBucketing, 2, true)
	if len(l.Buckets) != 1 || l.Numel != 65536 || l.NumelUnpadded != 1188 {
		t.Errorf("busbw: %+v, numel %d/%d", l.Buckets, l.Numel, l.NumelUnpadded)
	}
}

// TestSharedEmbeddingQuirk: under the distributed optimizer a shared
// embedding gets a bucket of its own, and the bucket it closes counts the
// 64-alignment pad before it as unpadded. Registration [emb (shared, 100),
// x (10), y (30)] with dp 1 (bucket ends on multiples of 128):
//
//	y: [0, 30); x: start pad(30, 64) = 64, [64, 74)
//	emb: start pad(74, 64) = 128; the bucket closes there with unpadded
//	     128 − 0 = 128 (y, x, their gaps and the 54-element pad), end 128
//	emb: [128, 228), closes its own bucket: unpadded 100, end 256
//
// With the embedding last in registration order (first in the buffer) it
// closes its own bucket at once: [0, 100) → [0, 128); then x' [128, 138),
// y' [192, 222), closing with unpadded 222 − 128 = 94 at 256. Without the
// distributed optimizer the flag changes nothing: one bucket.
func TestSharedEmbeddingQuirk(t *testing.T) {
	first := []LayoutParam{{Name: "emb", Numel: 100, SharedEmbedding: true}, {Name: "x", Numel: 10}, {Name: "y", Numel: 30}}
	l := DistOptLayout(first, config.NoBucketing, 1, false)
	want := []BucketRange{{0, 128, 128, []int{2, 1}}, {128, 256, 100, []int{0}}}
	if !reflect.DeepEqual(l.Buckets, want) || l.Numel != 256 || l.NumelUnpadded != 228 {
		t.Errorf("embedding first: %+v, numel %d/%d, want %+v, 256/228", l.Buckets, l.Numel, l.NumelUnpadded, want)
	}
	if l.Ranges[0] != (ParamRange{128, 228, 1}) || l.Ranges[1] != (ParamRange{64, 74, 0}) {
		t.Errorf("embedding first: ranges %v", l.Ranges)
	}

	last := []LayoutParam{{Name: "y'", Numel: 30}, {Name: "x'", Numel: 10}, {Name: "emb", Numel: 100, SharedEmbedding: true}}
	l = DistOptLayout(last, config.NoBucketing, 1, false)
	want = []BucketRange{{0, 128, 100, []int{2}}, {128, 256, 94, []int{1, 0}}}
	if !reflect.DeepEqual(l.Buckets, want) || l.Numel != 256 || l.NumelUnpadded != 194 {
		t.Errorf("embedding last: %+v, numel %d/%d, want %+v, 256/194", l.Buckets, l.Numel, l.NumelUnpadded, want)
	}

	if l := DefaultLayout(first, config.NoBucketing); len(l.Buckets) != 1 || l.Numel != 140 {
		t.Errorf("default layout: %+v, numel %d; want one bucket of 140", l.Buckets, l.Numel)
	}
}

// TestShardErrors: Shard refuses a bucket whose length does not divide by
// dp (a default layout of 1 + 2 = 3 elements over 2 ranks), naming the
// bucket, and ranks outside [0, dp).
func TestShardErrors(t *testing.T) {
	l := DefaultLayout([]LayoutParam{{Name: "a", Numel: 1}, {Name: "b", Numel: 2}}, config.NoBucketing)
	_, err := l.Shard(2, 0)
	if err == nil || !strings.Contains(err.Error(), "bucket 0 holds 3 elements") || !strings.Contains(err.Error(), "2 data-parallel ranks") {
		t.Errorf("3 elements over 2 ranks: %v", err)
	}
	if _, err := l.Shard(1, 0); err != nil {
		t.Errorf("one rank: %v", err)
	}
	for _, c := range [][2]int{{2, 2}, {2, -1}, {0, 0}} {
		if _, err := l.Shard(c[0], c[1]); err == nil {
			t.Errorf("shard %d of %d: no error", c[1], c[0])
		}
	}
}

// TestChunkLayoutRules: only pipeline rank 0's chunk 0 is bucketed; the
// distributed optimizer shards over dp·cp/instances ranks; without
// OverlapGradReduce there is one bucket.
func TestChunkLayoutRules(t *testing.T) {
	cfg := config.DefaultDDPConfig()
	cfg.OverlapGradReduce, cfg.BucketSize = true, 500
	if got := BucketSize(cfg, 8, 1110, 0, 0); got != 500 {
		t.Errorf("pp 0 chunk 0: %d, want 500", got)
	}
	for _, pc := range [][2]int{{1, 0}, {0, 1}, {3, 2}} {
		if got := BucketSize(cfg, 8, 1110, pc[0], pc[1]); got != config.NoBucketing {
			t.Errorf("pp %d chunk %d: %d, want NoBucketing", pc[0], pc[1], got)
		}
	}
	if l := ChunkLayout(threeParams(), cfg, 8, 0, 0); l.Shards != 0 || len(l.Buckets) != 2 || l.Numel != 1110 {
		t.Errorf("default layout, bucket size 500: %+v", l)
	}
	cfg.UseDistributedOptimizer, cfg.NumDistributedOptimizerInstances = true, 2
	l := ChunkLayout(threeParams(), cfg, 8, 0, 0)
	if l.Shards != 4 || len(l.Buckets) != 2 {
		t.Errorf("distopt over 8/2 ranks: %d shards, %d buckets", l.Shards, len(l.Buckets))
	}
	if l := ChunkLayout(threeParams(), cfg, 8, 1, 0); len(l.Buckets) != 1 {
		t.Errorf("pipeline rank 1: %d buckets, want 1", len(l.Buckets))
	}
	cfg.NumBuckets, cfg.BucketSize = 3, 0 // 1110/3 = 370 elements
	if l := ChunkLayout(threeParams(), cfg, 8, 0, 0); len(l.Buckets) != 2 || l.Buckets[0].NumelUnpadded != 1000 {
		t.Errorf("3 buckets requested: %+v", l.Buckets)
	}
	cfg.OverlapGradReduce = false
	if l := ChunkLayout(threeParams(), cfg, 8, 0, 0); len(l.Buckets) != 1 {
		t.Errorf("no overlap: %d buckets, want 1", len(l.Buckets))
	}
}

// FuzzLayout checks the layout's invariants on random parameter lists:
// 1..24 parameters of 1..3000 elements (at times 100000), one of them
// possibly a shared embedding, dp 1..8, bucket size NoBucketing or
// 0..4999, with and without the distributed optimizer and busbw padding.
func FuzzLayout(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint8(1), int32(-1), true, false, uint8(0))
	f.Add(uint64(2), uint8(10), uint8(7), int32(0), true, false, uint8(10))
	f.Add(uint64(3), uint8(20), uint8(3), int32(300), true, true, uint8(19))
	f.Add(uint64(4), uint8(24), uint8(5), int32(4000), false, false, uint8(0))
	f.Add(uint64(5), uint8(1), uint8(0), int32(0), true, false, uint8(0))
	f.Add(uint64(6), uint8(15), uint8(5), int32(64), true, false, uint8(7))
	f.Add(uint64(7), uint8(8), uint8(6), int32(-5), false, true, uint8(3))
	f.Fuzz(func(t *testing.T, seed uint64, n, dpb uint8, bucket int32, distopt, busbw bool, shared uint8) {
		rng := rand.New(rand.NewPCG(seed, 0x1ab))
		params := make([]LayoutParam, int(n)%24+1)
		for i := range params {
			params[i] = LayoutParam{Name: string(rune('A' + i)), Numel: 1 + rng.IntN(3000)}
			if rng.IntN(10) == 0 {
				params[i].Numel = 100000
			}
		}
		if s := int(shared) % (len(params) + 1); s < len(params) {
			params[s].SharedEmbedding = true
		}
		size := config.NoBucketing
		if bucket >= 0 {
			size = int(bucket) % 5000
		}
		dp := int(dpb)%8 + 1
		var l Layout
		if distopt {
			l = DistOptLayout(params, size, dp, busbw)
		} else {
			l = DefaultLayout(params, size)
		}
		checkLayout(t, l, size, distopt, dp, busbw)
		if distopt {
			checkShards(t, l, dp)
		}
	})
}

// checkLayout checks that the buckets tile the buffer, that each holds its
// parameters inside its unpadded part in buffer order (reverse registration)
// without overlap, that a bucket closes only when full or at a shared
// embedding, and, under the distributed optimizer, the alignment: parameter
// starts on multiples of 64, bucket ends on multiples of BucketEndDivisor.
func checkLayout(t *testing.T, l Layout, size int, distopt bool, dp int, busbw bool) {
	t.Helper()
	seen := make([]int, len(l.Params))
	pos, unpadded, total := 0, 0, 0
	prevEnd := -1
	for b, bk := range l.Buckets {
		if bk.Start != pos || bk.End-bk.Start < bk.NumelUnpadded || bk.NumelUnpadded <= 0 || len(bk.Params) == 0 {
			t.Fatalf("bucket %d %+v after %d: buckets must tile the buffer", b, bk, pos)
		}
		pos, unpadded = bk.End, unpadded+bk.NumelUnpadded
		last := bk.Params[len(bk.Params)-1]
		if l.Ranges[last].End != bk.Start+bk.NumelUnpadded && !(distopt && b+1 < len(l.Buckets) && l.Params[l.Buckets[b+1].Params[0]].SharedEmbedding) {
			t.Errorf("bucket %d: unpadded end %d is not its last parameter's end %d", b, bk.Start+bk.NumelUnpadded, l.Ranges[last].End)
		}
		for k, i := range bk.Params {
			r := l.Ranges[i]
			seen[i]++
			total += l.Params[i].Numel
			if r.Bucket != b || r.End-r.Start != l.Params[i].Numel || r.Start < bk.Start || r.End > bk.Start+bk.NumelUnpadded || r.Start < prevEnd {
				t.Fatalf("bucket %d [%d, %d): parameter %d at %+v (previous end %d)", b, bk.Start, bk.End, i, r, prevEnd)
			}
			if k > 0 && bk.Params[k-1] != i+1 {
				t.Errorf("bucket %d: parameter %d follows %d, want reverse registration order", b, i, bk.Params[k-1])
			}
			prevEnd = r.End
			if distopt && r.Start%ParamAlign != 0 {
				t.Errorf("parameter %d starts at %d, not a multiple of %d", i, r.Start, ParamAlign)
			}
			if distopt && l.Params[i].SharedEmbedding && k > 0 {
				t.Errorf("bucket %d: shared embedding %d follows parameter %d, want a bucket of its own", b, i, bk.Params[k-1])
			}
			full := size >= 0 && r.End-bk.Start >= size
			if k < len(bk.Params)-1 && (full || (distopt && l.Params[i].SharedEmbedding)) {
				t.Errorf("bucket %d is full (size %d) or shared at parameter %d, yet continues", b, size, i)
			}
			if k == len(bk.Params)-1 && b < len(l.Buckets)-1 && !full && !(distopt && (l.Params[i].SharedEmbedding || l.Params[i-1].SharedEmbedding)) {
				t.Errorf("bucket %d closes at parameter %d, neither full (size %d) nor at a shared embedding", b, i, size)
			}
		}
		if distopt && (bk.End%BucketEndDivisor(dp, busbw) != 0 || (bk.End-bk.Start)%dp != 0) {
			t.Errorf("bucket %d [%d, %d): end not padded to %d", b, bk.Start, bk.End, BucketEndDivisor(dp, busbw))
		}
		if !distopt && bk.End != bk.Start+bk.NumelUnpadded {
			t.Errorf("bucket %d %+v padded without the distributed optimizer", b, bk)
		}
	}
	for i, c := range seen {
		if c != 1 {
			t.Errorf("parameter %d is in %d buckets", i, c)
		}
	}
	if l.Numel != pos || l.NumelUnpadded != unpadded || (!distopt && l.Numel != total) {
		t.Errorf("numel %d, unpadded %d; buckets end at %d, hold %d unpadded, parameters %d", l.Numel, l.NumelUnpadded, pos, unpadded, total)
	}
}

// checkShards checks that the dp ranks' world ranges tile every bucket in
// equal parts, that each piece's ranges agree with each other, and that the
// pieces of all ranks reassemble every parameter exactly once.
func checkShards(t *testing.T, l Layout, dp int) {
	t.Helper()
	pieces := make([][][2]int, len(l.Params))
	for r := 0; r < dp; r++ {
		shards, err := l.Shard(dp, r)
		if err != nil {
			t.Fatal(err)
		}
		for b, s := range shards {
			bk := l.Buckets[b]
			m := (bk.End - bk.Start) / dp
			if s.Bucket != b || s.World != [2]int{bk.Start + r*m, bk.Start + (r+1)*m} {
				t.Fatalf("rank %d bucket %d: world %v", r, b, s.World)
			}
			for _, p := range s.Params {
				pr := l.Ranges[p.Param]
				w, loc := p.GbufWorld, p.GbufLocal
				if w[0] >= w[1] || w[0] < s.World[0] || w[1] > s.World[1] || loc != [2]int{w[0] - s.World[0], w[1] - s.World[0]} ||
					p.GbufWorldInBucket != [2]int{w[0] - bk.Start, w[1] - bk.Start} || p.ParamRange != [2]int{w[0] - pr.Start, w[1] - pr.Start} {
					t.Fatalf("rank %d bucket %d: inconsistent piece %+v of parameter at %+v", r, b, p, pr)
				}
				pieces[p.Param] = append(pieces[p.Param], p.ParamRange)
			}
		}
	}
	for i, ps := range pieces {
		slices.SortFunc(ps, func(a, b [2]int) int { return a[0] - b[0] })
		at := 0
		for _, p := range ps {
			if p[0] != at {
				t.Fatalf("parameter %d: pieces %v do not reassemble [0, %d)", i, ps, l.Params[i].Numel)
			}
			at = p[1]
		}
		if at != l.Params[i].Numel {
			t.Fatalf("parameter %d: pieces %v cover [0, %d) of %d", i, ps, at, l.Params[i].Numel)
		}
	}
}
