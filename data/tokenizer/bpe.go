package tokenizer

import "sync"

// bpeModel is a byte-level BPE model in id space: a word (a piece of the pre-tokenization,
// as raw bytes) starts as the ids of its single bytes, and the adjacent pair with the
// lowest merge rank is merged, leftmost first, until no adjacent pair has a merge. This
// is Hugging Face's BPE, and on a vocabulary whose every merge's parts were made by
// earlier merges (GPT-2's, any trained one) it equals GPT-2's encoder.py, which merges all
// occurrences of the lowest-ranked pair at once.
type bpeModel struct {
	byteID [256]int32       // id of the single-byte token, -1 when the vocabulary lacks it
	merges map[uint64]merge // pairKey(left, right) → the merge's rank and result

	unkID   int32 // the id standing for a byte without a token, -1: drop such bytes
	fuseUnk bool  // consecutive unknown bytes become one unk id

	// wholeWord, when set (Hugging Face's ignore_merges), maps a word's bytes to its id
	// when the whole word is a token: it is then that one token, without merging.
	wholeWord map[string]int32

	cache wordCache
}

type merge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// maxScanWord is the longest word (in symbols) merged by rescanning all pairs after every
// merge (quadratic, fastest for the short words of real text); longer ones use a heap.
const maxScanWord = 48

// maxCachedWord is the longest word (in bytes) whose ids are cached.
const maxCachedWord = 256

var scratchPool = sync.Pool{New: func() any { s := make([]int32, 0, 256); return &s }}

// appendWord appends the ids of word (non-empty raw bytes) to out.
func (m *bpeModel) appendWord(out []int32, word string) []int32 {
	if len(word) == 1 {
		if id := m.byteID[word[0]]; id >= 0 {
			return append(out, id)
		}
	}
	if m.wholeWord != nil {
		if id, ok := m.wholeWord[word]; ok {
			return append(out, id)
		}
	}
	cacheable := len(word) <= maxCachedWord
	if cacheable {
		if ids, ok := m.cache.get(word); ok {
			return append(out, ids...)
		}
	}
	sp := scratchPool.Get().(*[]int32)
	syms := m.initial((*sp)[:0], word)
	if len(syms) <= maxScanWord {
		syms = m.mergeScan(syms)
	} else {
		syms = m.mergeHeap(syms)
	}
	out = append(out, syms...)
	if cacheable {
		m.cache.put(word, syms)
	}
	*sp = syms
	scratchPool.Put(sp)
	return out
}

// initial appends the ids of word's bytes to syms: unknown bytes become the unk id (one per
// run with fuseUnk) or are dropped.
func (m *bpeModel) initial(syms []int32, word string) []int32 {
	prevUnk := false
	for i := 0; i < len(word); i++ {
		id := m.byteID[word[i]]
		if id < 0 {
			if m.unkID >= 0 && !(m.fuseUnk && prevUnk) {
				syms = append(syms, m.unkID)
			}
			prevUnk = true
			continue
		}
		prevUnk = false
		syms = append(syms, id)
	}
	return syms
}

// mergeScan merges syms in place: find the lowest-ranked adjacent pair (leftmost among
// equal ranks), merge it, repeat.
func (m *bpeModel) mergeScan(syms []int32) []int32 {
	for len(syms) > 1 {
		best, at := int32(-1), -1
		var res int32
		for i := 0; i+1 < len(syms); i++ {
			if mg, ok := m.merges[pairKey(syms[i], syms[i+1])]; ok && (at < 0 || mg.rank < best) {
				best, at, res = mg.rank, i, mg.id
			}
		}
		if at < 0 {
			break
		}
		syms[at] = res
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// mergeHeap is mergeScan for long words, in O(n log n): the symbols form a linked list
// and the candidate merges a binary heap ordered by (rank, position); an entry whose pair
// has changed since it was pushed is skipped when popped.
func (m *bpeModel) mergeHeap(syms []int32) []int32 {
	hs := heapPool.Get().(*heapScratch)
	defer heapPool.Put(hs)
	n := int32(len(syms))
	hs.next = hs.next[:0]
	hs.prev = hs.prev[:0]
	for i := range n {
		hs.next = append(hs.next, i+1)
		hs.prev = append(hs.prev, i-1)
	}
	next, prev := hs.next, hs.prev // prev[i] < -1: symbol i was merged into its left
	q := hs.q[:0]
	push := func(i int32) {
		if j := next[i]; j < n {
			if mg, ok := m.merges[pairKey(syms[i], syms[j])]; ok {
				q = q.push(pending{rank: mg.rank, pos: i, left: syms[i], right: syms[j], id: mg.id})
			}
		}
	}
	for i := int32(0); i+1 < n; i++ {
		push(i)
	}
	for len(q) > 0 {
		var p pending
		q, p = q.pop()
		i := p.pos
		j := next[i]
		if prev[i] < -1 || j >= n || syms[i] != p.left || syms[j] != p.right {
			continue // stale
		}
		syms[i] = p.id
		prev[j] = -2
		next[i] = next[j]
		if next[j] < n {
			prev[next[j]] = i
		}
		if prev[i] >= 0 {
			push(prev[i])
		}
		push(i)
	}
	hs.q = q
	out := syms[:0]
	for i := int32(0); i < n; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

type heapScratch struct {
	next, prev []int32
	q          mergeQueue
}

var heapPool = sync.Pool{New: func() any { return new(heapScratch) }}

// pending is a merge waiting in the heap: the pair (left, right) at position pos.
type pending struct {
	rank, pos, left, right, id int32
}

func (a pending) before(b pending) bool {
	return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos
}

// mergeQueue is a binary min-heap of pending merges.
type mergeQueue []pending

func (q mergeQueue) push(p pending) mergeQueue {
	q = append(q, p)
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].before(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
	return q
}

func (q mergeQueue) pop() (mergeQueue, pending) {
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(q) && q[l].before(q[small]) {
			small = l
		}
		if r < len(q) && q[r].before(q[small]) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	return q, top
}
