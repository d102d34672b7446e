package config

import "testing"

func TestEffectiveBucketSize(t *testing.T) {
	overlap := DefaultDDPConfig()
	overlap.OverlapGradReduce = true
	explicit := overlap
	explicit.BucketSize = 12345

	for _, tc := range []struct {
		name string
		c    DDPConfig
		dpcp int
		want int
	}{
		{"no overlap: no bucketing", DefaultDDPConfig(), 8, NoBucketing},
		{"no overlap beats an explicit size", func() DDPConfig { c := explicit; c.OverlapGradReduce = false; return c }(), 8, NoBucketing},
		{"default, small group: 40M", overlap, 8, 40_000_000},
		{"default, dp·cp = 40: 40M", overlap, 40, 40_000_000},
		{"default, dp·cp = 41: 41M", overlap, 41, 41_000_000},
		{"default, dp·cp = 128: 128M", overlap, 128, 128_000_000},
		{"explicit size", explicit, 128, 12345},
	} {
		if got := tc.c.EffectiveBucketSize(tc.dpcp); got != tc.want {
			t.Errorf("%s: EffectiveBucketSize(%d) = %d, want %d", tc.name, tc.dpcp, got, tc.want)
		}
		if got := tc.c.ResolveBucketSize(tc.dpcp, 999); got != tc.want {
			t.Errorf("%s: ResolveBucketSize(%d, 999) = %d, want %d", tc.name, tc.dpcp, got, tc.want)
		}
	}
}

func TestResolveBucketSizeNumBuckets(t *testing.T) {
	c := DefaultDDPConfig()
	c.OverlapGradReduce, c.NumBuckets = true, 3
	if got := c.ResolveBucketSize(8, 1000); got != 333 {
		t.Errorf("1000 params in 3 buckets: %d, want 333", got)
	}
	if got := c.ResolveBucketSize(8, 2); got != 0 {
		t.Errorf("2 params in 3 buckets: %d, want 0 (a bucket per parameter)", got)
	}
	c.OverlapGradReduce = false
	if got := c.ResolveBucketSize(8, 1000); got != NoBucketing {
		t.Errorf("no overlap: %d, want NoBucketing", got)
	}
}

func TestBucketSizeProgrammerErrors(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	c := DefaultDDPConfig()
	c.OverlapGradReduce, c.NumBuckets = true, 2
	mustPanic("EffectiveBucketSize with num_buckets", func() { c.EffectiveBucketSize(8) })
	mustPanic("ResolveBucketSize with dpcp 0", func() { DefaultDDPConfig().ResolveBucketSize(0, 10) })
}
