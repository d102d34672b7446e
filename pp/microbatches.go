package pp

// GetPPRankMicrobatches returns how many of a rank's microbatch steps run in
// the warmup phase (forwards only) and how many remain for the steady 1F1B
// phase and the cooldown (schedules.py get_pp_rank_microbatches, without the
// overlap_moe_expert_parallel_comm term), with M microbatches, C = chunks
// model chunks, G = groupSize, P = pp and r = rank:
//
//	total = M·C
//	W = total                        if forwardOnly
//	W = P − r − 1                    if P > 1, not interleaved
//	W = 2·(P − r − 1) + (C − 1)·G    if P > 1, interleaved
//	W = 0                            otherwise
//	W ≥ total  ⇒  W = total and allWarmup
//	remaining = total − W
//
// The non-interleaved executor clamps with min(P−r−1, M) itself
// (WithoutInterleaving); for C = 1 the result is the same.
func GetPPRankMicrobatches(m, chunks, groupSize, pp, rank int, interleaved, forwardOnly bool) (total, warmup, remaining int, allWarmup bool) {
	total = m * chunks
	switch {
	case forwardOnly:
		warmup = total
	case pp > 1 && !interleaved:
		warmup = pp - rank - 1
	case pp > 1:
		warmup = 2*(pp-rank-1) + (chunks-1)*groupSize
	}
	if warmup >= total {
		warmup = total
		allWarmup = true
	}
	return total, warmup, total - warmup, allWarmup
}

// TableEntry is one virtual microbatch of the interleaved schedule: the
// forward of (Microbatch, Chunk). Its backward is (Microbatch, C−1−Chunk).
type TableEntry struct {
	Microbatch int
	Chunk      int
}

// GetScheduleTable returns the interleaved schedule's lookup table, indexed
// by virtual microbatch id (schedules.py get_schedule_table): the
// microbatches are cut into consecutive groups of G = groupSize (the last
// group holds the M mod G left over, when that is not 0), and each group
// runs its microbatches through chunk 0, then chunk 1, … chunk C−1. For
// M = 5, C = 2, G = 3:
//
//	virtual id  0 1 2 3 4 5 6 7 8 9
//	microbatch  0 1 2 0 1 2 3 4 3 4
//	chunk       0 0 0 1 1 1 0 0 1 1
//
// A groupSize below 1 is taken as 1.
func GetScheduleTable(m, chunks, groupSize int) []TableEntry {
	if groupSize < 1 {
		groupSize = 1
	}
	table := make([]TableEntry, 0, m*chunks)
	for start := 0; start < m; start += groupSize {
		end := start + groupSize
		if end >= m {
			end = m
		}
		for c := 0; c < chunks; c++ {
			for mb := start; mb < end; mb++ {
				table = append(table, TableEntry{Microbatch: mb, Chunk: c})
			}
		}
	}
	return table
}

// ConvertScheduleTableToOrder returns a rank's compute order as signed
// 1-based chunk ids (convert_schedule_table_to_order,
// transformer/cuda_graphs.py at core_v0.19): a forward of chunk c is c+1,
// a backward of chunk c is −(c+1). With chunk_k the forward chunk of table
// entry k, f[k] = chunk_k+1 and b[k] = chunk_k−C, which is −(c+1) for the
// backward chunk c = C−1−chunk_k of virtual microbatch k (so −C is chunk
// C−1's backward, the first one to run, and −1 chunk 0's). The order is
// the W warmup forwards f[0:W], then f[i], b[i−W] for each i ≥ W (one
// forward, one backward), then the W cooldown backwards b[len−W:].
func ConvertScheduleTableToOrder(warmup, chunks int, table []TableEntry) []int {
	n := len(table)
	warmup = min(max(warmup, 0), n)
	f := func(k int) int { return table[k].Chunk + 1 }
	b := func(k int) int { return table[k].Chunk - chunks }
	order := make([]int, 0, 2*n)
	for k := 0; k < warmup; k++ {
		order = append(order, f(k))
	}
	for i := warmup; i < n; i++ {
		order = append(order, f(i), b(i-warmup))
	}
	for k := n - warmup; k < n; k++ {
		order = append(order, b(k))
	}
	return order
}
