package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync"
)

// wordCache maps words (raw bytes) to their BPE ids, shared by all goroutines encoding
// with one tokenizer. It is split in shards, each behind its own lock, so that concurrent
// encoders rarely wait for each other; a full shard forgets one arbitrary word for every
// new one (Go's map iteration order is random), which keeps the frequent words with high
// probability. At most cacheShards·cacheShardWords words (131072) are kept.
type wordCache struct {
	shards [cacheShards]cacheShard
}

const (
	cacheShards     = 64
	cacheShardWords = 2048
)

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int32
	_  [40]byte // keep shards on separate cache lines
}

var cacheSeed = maphash.MakeSeed()

func (c *wordCache) shard(word string) *cacheShard {
	return &c.shards[maphash.String(cacheSeed, word)%cacheShards]
}

func (c *wordCache) get(word string) ([]int32, bool) {
	s := c.shard(word)
	s.mu.RLock()
	ids, ok := s.m[word]
	s.mu.RUnlock()
	return ids, ok
}

// put stores a copy of ids under a copy of word (word is usually a slice of a large text,
// which must not be kept alive by the cache).
func (c *wordCache) put(word string, ids []int32) {
	s := c.shard(word)
	v := append([]int32(nil), ids...)
	k := strings.Clone(word)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[string][]int32, 64)
	}
	if _, ok := s.m[k]; !ok && len(s.m) >= cacheShardWords {
		for old := range s.m {
			delete(s.m, old)
			break
		}
	}
	s.m[k] = v
	s.mu.Unlock()
}
