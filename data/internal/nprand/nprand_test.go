package nprand

import (
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"testing"
)

// fixture is data/gptdata/testdata/nprand.json, written by numpy itself
// (tools/torchref/gpt_dataset_ref.py).
type fixture struct {
	Uint32 []struct {
		Seed  uint32
		First []uint32
		At999 uint32 `json:"at_999"`
	}
	Interval []struct {
		Seed  uint32
		Max   string
		Draws []string
	}
	Shuffle []struct {
		Seed        uint32
		N           int
		DType       string
		First, Then []int64
	}
}

func load(t *testing.T) fixture {
	t.Helper()
	b, err := os.ReadFile("../../gptdata/testdata/nprand.json")
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Uint32) == 0 || len(f.Interval) == 0 || len(f.Shuffle) == 0 {
		t.Fatal("nprand.json: a section is empty")
	}
	return f
}

func TestUint32MatchesNumpy(t *testing.T) {
	for _, c := range load(t).Uint32 {
		r := New(c.Seed)
		var got []uint32
		for i := 0; i < 1000; i++ {
			v := r.Uint32()
			if i < len(c.First) {
				got = append(got, v)
			}
			if i == 999 && v != c.At999 {
				t.Errorf("seed %d: draw 999 = %d, numpy %d", c.Seed, v, c.At999)
			}
		}
		if !slices.Equal(got, c.First) {
			t.Errorf("seed %d: first draws %v, numpy %v", c.Seed, got, c.First)
		}
	}
}

func TestIntervalMatchesNumpy(t *testing.T) {
	for _, c := range load(t).Interval {
		max, err := strconv.ParseUint(c.Max, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		r := New(c.Seed)
		for i, s := range c.Draws {
			want, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Interval(max); got != want {
				t.Fatalf("seed %d, max %d: draw %d = %d, numpy %d", c.Seed, max, i, got, want)
			}
		}
	}
}

// shuffled shuffles arange(n) then arange(m) of element type E with one
// generator, as the fixture's numpy did.
func shuffled[E int32 | int64 | uint32](seed uint32, n, m int) (first, then []int64) {
	r := New(seed)
	run := func(k int) []int64 {
		a := make([]E, k)
		for i := range a {
			a[i] = E(i)
		}
		Shuffle(r, a)
		out := make([]int64, k)
		for i, v := range a {
			out[i] = int64(v)
		}
		return out
	}
	first = run(n)
	return first, run(m)
}

func TestShuffleMatchesNumpy(t *testing.T) {
	for _, c := range load(t).Shuffle {
		var first, then []int64
		m := c.N/2 + 3
		switch c.DType {
		case "int32":
			first, then = shuffled[int32](c.Seed, c.N, m)
		case "int64":
			first, then = shuffled[int64](c.Seed, c.N, m)
		case "uint32":
			first, then = shuffled[uint32](c.Seed, c.N, m)
		default:
			t.Fatalf("dtype %q", c.DType)
		}
		if !slices.Equal(first, c.First) || !slices.Equal(then, c.Then) {
			t.Errorf("seed %d, n %d, %s: got %v then %v, numpy %v then %v", c.Seed, c.N, c.DType, first, then, c.First, c.Then)
		}
	}
}

func TestIntervalZeroDrawsNothing(t *testing.T) {
	a, b := New(5), New(5)
	if a.Interval(0) != 0 {
		t.Fatal("Interval(0) != 0")
	}
	if a.Uint32() != b.Uint32() {
		t.Fatal("Interval(0) consumed a draw")
	}
}
