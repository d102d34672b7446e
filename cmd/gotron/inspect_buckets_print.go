package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/dp"
)

func bucketsDoc(r bucketsReport) (bucketsJSON, error) {
	doc := bucketsJSON{Buffers: []bufferJSON{}, Shards: []rankShardsJSON{}}
	for _, b := range r.buffers {
		l := b.layout
		buf := bufferJSON{DType: r.dtype.String(), Numel: l.Numel, NumelUnpadded: l.NumelUnpadded, Buckets: []bucketJSON{}}
		for _, bk := range l.Buckets {
			bj := bucketJSON{Start: bk.Start, End: bk.End, NumelUnpadded: bk.NumelUnpadded, Params: []paramSpanJSON{}}
			for _, i := range bk.Params {
				bj.Params = append(bj.Params, paramSpanJSON{Name: l.Params[i].Name, Start: l.Ranges[i].Start, End: l.Ranges[i].End})
			}
			buf.Buckets = append(buf.Buckets, bj)
		}
		doc.Buffers = append(doc.Buffers, buf)
	}
	if !r.ddp.UseDistributedOptimizer {
		return doc, nil
	}
	for q := 0; q < r.dp; q++ {
		rank := rankShardsJSON{DPRank: q, Buckets: []bucketShardJSON{}}
		for _, b := range r.buffers {
			shards, err := shardOf(b.layout, q)
			if err != nil {
				return doc, err
			}
			for _, s := range shards {
				sj := bucketShardJSON{WorldRange: s.World, Params: []shardPieceJSON{}}
				for _, p := range s.Params {
					sj.Params = append(sj.Params, shardPieceJSON{Name: b.layout.Params[p.Param].Name, GbufLocal: p.GbufLocal, ParamRange: p.ParamRange})
				}
				rank.Buckets = append(rank.Buckets, sj)
			}
		}
		doc.Shards = append(doc.Shards, rank)
	}
	return doc, nil
}

func writeBucketsJSON(w io.Writer, r bucketsReport) error {
	doc, err := bucketsDoc(r)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(doc)
}

// writeBucketsTable prints a header, then per buffer its buckets with
// their parameters and, under the distributed optimizer, the shards of
// every bucket: one row per parameter piece, rows of a bucket's shard
// listing the data-parallel ranks that hold it.
func writeBucketsTable(w io.Writer, r bucketsReport) error {
	group := fmt.Sprintf("data-parallel size %d", r.dp)
	if r.cp > 1 {
		group = fmt.Sprintf("data-parallel group dp·cp = %d·%d = %d ranks", r.dp/r.cp, r.cp, r.dp)
	}
	fmt.Fprintf(w, "pipeline rank %d of %d, %d model chunk(s); %s (world size %d)\n",
		r.pipeRank, r.pipeSize, len(r.buffers), group, r.world)
	if d := r.ddp; d.ShardsGradients() {
		s := r.dp / max(d.NumDistributedOptimizerInstances, 1)
		kept := "every bucket's parameters stay whole between passes"
		if d.ShardsParameters() {
			kept = "a unit's parameters are gathered for the passes that use it and released after; the other buckets stay whole"
		}
		fmt.Fprintf(w, "Megatron-FSDP %s: %d instance(s); a bucket per unit (a decoder layer), then the tied embedding and the other parameters; every bucket split into %d shards, parameters back to back, bucket ends on multiples of %d; gradients reduce-scattered into the shards after every micro-batch; %s\n",
			d.DataParallelShardingStrategy, max(d.NumDistributedOptimizerInstances, 1), s, dp.BucketEndDivisor(s, d.PadBucketsForHighNCCLBusBW), kept)
	} else if r.ddp.UseDistributedOptimizer {
		s := r.dp / max(r.ddp.NumDistributedOptimizerInstances, 1)
		fmt.Fprintf(w, "distributed optimizer: %d instance(s), every bucket split into %d shards; parameters start on multiples of %d, bucket ends on multiples of %d\n",
			max(r.ddp.NumDistributedOptimizerInstances, 1), s, dp.ParamAlign, dp.BucketEndDivisor(s, r.ddp.PadBucketsForHighNCCLBusBW))
	} else {
		fmt.Fprintln(w, "no distributed optimizer: buckets are all-reduced whole, no shards")
	}
	for i, b := range r.buffers {
		l := b.layout
		note := bucketSizeNote(b.bucketSize, r.ddp.OverlapGradReduce)
		if r.ddp.ShardsGradients() {
			note = fmt.Sprintf("units 0-%d (decoder layers), then %d bucket(s) that stay whole", b.units-1, len(l.Buckets)-b.units)
		}
		fmt.Fprintf(w, "\nbuffer %d, model chunk %d (%s): %s, numel %d, numel_unpadded %d, %d bucket(s), %s\n",
			i, i, chunkCell(b.chunk), r.dtype, l.Numel, l.NumelUnpadded, len(l.Buckets), note)
		tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
		fmt.Fprintln(tw, "bucket\trange\tunpadded\tparameter\trange\tnumel")
		for k, bk := range l.Buckets {
			lead := fmt.Sprintf("%d\t%s\t%d", k, span(bk.Start, bk.End), bk.NumelUnpadded)
			for _, p := range bk.Params {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", lead, l.Params[p].Name, span(l.Ranges[p].Start, l.Ranges[p].End), l.Params[p].Numel)
				lead = "\t\t"
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if r.ddp.UseDistributedOptimizer {
			if err := writeShardsTable(w, i, r.dp, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeShardsTable prints the shards of every bucket of buffer i, l.
func writeShardsTable(w io.Writer, i, dpSize int, l dp.Layout) error {
	fmt.Fprintf(w, "\nshards of buffer %d (gbuf_local: elements in the rank's shard; param_range: elements of the flattened parameter)\n", i)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "bucket\tdp rank\tworld range\tparameter\tgbuf_local\tparam_range")
	all := make([][]dp.BucketShard, l.Shards)
	for s := range all {
		var err error
		if all[s], err = l.Shard(l.Shards, s); err != nil {
			return err
		}
	}
	for k := range l.Buckets {
		for s := range all {
			sh := all[s][k]
			var ranks []string
			for q := s; q < dpSize; q += l.Shards {
				ranks = append(ranks, fmt.Sprint(q))
			}
			lead := fmt.Sprintf("%d\t%s\t%s", k, strings.Join(ranks, ","), span(sh.World[0], sh.World[1]))
			if s > 0 {
				lead = fmt.Sprintf("\t%s\t%s", strings.Join(ranks, ","), span(sh.World[0], sh.World[1]))
			}
			if len(sh.Params) == 0 {
				fmt.Fprintf(tw, "%s\t(padding)\n", lead)
			}
			for _, p := range sh.Params {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", lead, l.Params[p.Param].Name, span(p.GbufLocal[0], p.GbufLocal[1]), span(p.ParamRange[0], p.ParamRange[1]))
				lead = "\t\t"
			}
		}
	}
	return tw.Flush()
}

// bucketSizeNote says how a buffer was cut: "bucket_size N" or why it is
// one bucket.
func bucketSizeNote(size int, overlap bool) string {
	switch {
	case size != config.NoBucketing:
		return fmt.Sprintf("bucket_size %d", size)
	case !overlap:
		return "one bucket (no --overlap-grad-reduce)"
	}
	return "one bucket (only pipeline rank 0's first model chunk is bucketed)"
}

// span formats [a, b).
func span(a, b int) string { return fmt.Sprintf("[%d, %d)", a, b) }
