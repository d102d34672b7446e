package ckpt

import (
	"strings"
	"testing"
)

// TestShardedRoundTrip: a tensor whose whole shape is [5, 4] (the local
// tensors padded to 6 rows, as a vocabulary is) is saved by two
// tensor-parallel ranks splitting its rows, each rank's local tensor cut
// into two flat shards (a distributed optimizer's), and loaded back by a
// layout that splits its columns, whole local tensors and a shard of one:
// every element comes back, the padding rows are not saved.
func TestShardedRoundTrip(t *testing.T) {
	whole := []int{5, 4}
	val := func(i, j int) float32 { return float32(10*i + j) }
	dir := t.TempDir()
	tmp, err := BeginSave(dir, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var shards []Shard
	for tpRank := range 2 {
		local := []int{3, 4} // rows 3·tpRank… of the padded [6, 4]
		data := make([]float32, 12)
		for k := range data {
			data[k] = val(3*tpRank+k/4, k%4)
		}
		for dpRank, lohi := range [][2]int{{0, 5}, {5, 12}} {
			s := Sharded{Key: "model/w", Whole: whole, Local: local, Part: Partition{Dim: 0, Stride: 1, Size: 2, Rank: tpRank},
				Lo: lohi[0], Data: data[lohi[0]:lohi[1]]}
			sh, err := WriteShard(tmp, 2*tpRank+dpRank, s.Pieces())
			if err != nil {
				t.Fatal(err)
			}
			shards = append(shards, sh)
		}
	}
	if err := Commit(dir, tmp, &Manifest{Iteration: 1, Tensors: map[string][]int{"model/w": whole}, Shards: shards}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for rank := range 2 {
		part := Partition{Dim: 1, Stride: 1, Size: 2, Rank: rank}
		local := []int{6, 2}
		for _, lohi := range [][2]int{{0, 12}, {3, 10}} {
			s := Sharded{Key: "model/w", Whole: whole, Local: local, Part: part, Lo: lohi[0], Data: make([]float32, lohi[1]-lohi[0])}
			for k := range s.Data {
				s.Data[k] = -1
			}
			if err := r.Load(s); err != nil {
				t.Fatal(err)
			}
			for k, v := range s.Data {
				i, j := (lohi[0]+k)/2, 2*rank+(lohi[0]+k)%2
				want := val(i, j)
				if i >= whole[0] {
					want = -1 // a padding row: not in the checkpoint, left alone
				}
				if v != want {
					t.Fatalf("rank %d range %v: element %d (whole [%d, %d]) = %g, want %g", rank, lohi, lohi[0]+k, i, j, v, want)
				}
			}
		}
	}
	if err := r.Load(Sharded{Key: "model/x", Whole: whole, Local: whole, Part: Partition{Dim: -1}, Data: make([]float32, 20)}); err == nil {
		t.Error("Load of a tensor the checkpoint lacks succeeded")
	} else if !strings.Contains(err.Error(), "model/x") {
		t.Errorf("Load of a missing tensor: %v, want it named", err)
	}
}
