package ckpt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
)

// rankPieces are rank r's pieces of iteration it: rows [3r, 3r+3) of a
// 6×4 tensor whose element i holds i + it.
func rankPieces(r, it int) []PieceData {
	bx := Box{Offset: []int{3 * r, 0}, Shape: []int{3, 4}}
	d := make([]float32, 12)
	for i := range d {
		d[i] = float32(12*r + i + it)
	}
	return []PieceData{{Key: "model/w", Box: bx, Data: d}}
}

// collectiveSave runs one save of iteration it on two ranks, each
// writing its rows with write (nil: WriteShard), async or not; it
// returns each rank's error.
func collectiveSave(t *testing.T, dir string, it int, async bool, write func(string, int, []PieceData) (Shard, error)) [2]error {
	t.Helper()
	var errs [2]error
	w := local.NewWorld(2, comm.Options{Timeout: time.Minute})
	_ = w.Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		s := &Saver{World: g, Dir: dir, WriteShard: write}
		var m *Manifest
		if g.Rank() == 0 {
			m = &Manifest{Iteration: it, Tensors: map[string][]int{"model/w": {6, 4}}, Ranks: []RankState{{Rank: 0}, {Rank: 1}}}
		}
		err := s.Begin(ctx, it, m)
		installed := 0
		if err == nil {
			installed, err = s.Write(ctx, rankPieces(g.Rank(), it), async)
		}
		if err == nil && async {
			if s.Pending() != it {
				err = fmt.Errorf("Pending() = %d during an async save of %d", s.Pending(), it)
			} else {
				installed, err = s.Finish(ctx, true)
			}
		}
		if err == nil && installed != it {
			err = fmt.Errorf("installed %d, want %d", installed, it)
		}
		errs[g.Rank()] = err
		return nil
	})
	return errs
}

// TestSaverRoundTrip: two ranks save their halves, at once and in the
// background; the checkpoint reads back whole, and a third save whose
// rank-1 shard fails leaves the second installed, both ranks saying so.
func TestSaverRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		it    int
		async bool
	}{{1, false}, {2, true}} {
		it, async := c.it, c.async
		if errs := collectiveSave(t, dir, it, async, nil); errs[0] != nil || errs[1] != nil {
			t.Fatalf("save %d (async %v): %v", it, async, errs)
		}
	}
	check := func() {
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got := make([]float32, 24)
		if err := r.Fill("model/w", Box{Offset: []int{0, 0}, Shape: []int{6, 4}}, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != float32(i+r.Manifest.Iteration) {
				t.Fatalf("iteration %d: element %d = %v, want %d", r.Manifest.Iteration, i, v, i+r.Manifest.Iteration)
			}
		}
	}
	check()
	fail := func(dir string, rank int, pieces []PieceData) (Shard, error) {
		if rank == 1 {
			return Shard{}, errors.New("disk full")
		}
		return WriteShard(dir, rank, pieces)
	}
	errs := collectiveSave(t, dir, 3, false, fail)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "the checkpoint of iteration 2") {
			t.Errorf("rank %d: a failed save: %v, want an error naming the intact iteration 2", r, err)
		}
	}
	if !strings.Contains(errs[0].Error(), "rank 1: disk full") {
		t.Errorf("rank 0's error %q does not name rank 1's failure", errs[0])
	}
	if it, err := Latest(dir); err != nil || it != 2 {
		t.Errorf("after the failed save: latest %d (%v), want 2", it, err)
	}
	check()
}

// TestSaverOneAtATime: Begin while a save is in flight is refused;
// Write without Begin too.
func TestSaverOneAtATime(t *testing.T) {
	dir := t.TempDir()
	err := local.NewWorld(1, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		s := &Saver{World: g, Dir: dir}
		if _, err := s.Write(ctx, nil, false); err == nil {
			return errors.New("Write without Begin succeeded")
		}
		m := &Manifest{Iteration: 1, Tensors: map[string][]int{"model/w": {6, 4}}}
		if err := s.Begin(ctx, 1, m); err != nil {
			return err
		}
		if err := s.Begin(ctx, 2, m); err == nil || !strings.Contains(err.Error(), "Finish it first") {
			return fmt.Errorf("a second Begin: %v", err)
		}
		s.Abandon()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
