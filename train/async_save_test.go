package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
)

// TestAsyncSaveEqualsSyncSave trains TP 2 × DP 2 with the distributed
// optimizer and a save every 2 iterations, with and without --async-save:
// the losses are the same bits, every iteration's shards and manifest are
// the same bytes, and the run reports the last iteration saved. With
// --exit-interval 3 the stop waits for the save in flight (iteration 2)
// and saves iteration 3.
func TestAsyncSaveEqualsSyncSave(t *testing.T) {
	args := func(async bool) Args {
		a := mockArgs(6)
		a.WorldSize, a.Model.TensorModelParallelSize = 4, 2
		a.DDP.UseDistributedOptimizer = true
		a.Save, a.SaveInterval, a.AsyncSave = t.TempDir(), 2, async
		return a
	}
	sync, async := args(false), args(true)
	want, err := Run(context.Background(), sync, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(context.Background(), async, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Losses) != fmt.Sprint(want.Losses) || got.Saved != 6 || want.Saved != 6 {
		t.Fatalf("--async-save: losses %v, saved %d; synchronous: %v, saved %d", got.Losses, got.Saved, want.Losses, want.Saved)
	}
	for _, it := range []int{2, 4, 6} {
		files, err := os.ReadDir(ckpt.IterDir(sync.Save, it))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) < 2 {
			t.Fatalf("iteration %d holds %d files", it, len(files))
		}
		for _, f := range files {
			a, errA := os.ReadFile(filepath.Join(ckpt.IterDir(sync.Save, it), f.Name()))
			b, errB := os.ReadFile(filepath.Join(ckpt.IterDir(async.Save, it), f.Name()))
			if errA != nil || errB != nil || !bytes.Equal(a, b) {
				t.Errorf("iteration %d, %s: the asynchronous save differs (%v, %v)", it, f.Name(), errA, errB)
			}
		}
	}

	stop := args(true)
	stop.ExitInterval = 3
	res, err := Run(context.Background(), stop, Options{})
	if err != nil || res.Exit == nil || res.Saved != 3 {
		t.Fatalf("--exit-interval 3 with --async-save: %+v, %v", res, err)
	}
	for _, it := range []int{2, 3} {
		if _, err := os.Stat(filepath.Join(ckpt.IterDir(stop.Save, it), ckpt.ManifestFile)); err != nil {
			t.Errorf("iteration %d: %v", it, err)
		}
	}
}

// TestAsyncSaveWritesInBackground holds both ranks' shard writers until
// the test releases them: save returns with the shards unwritten, a
// non-blocking finish installs nothing while they are, and a blocking one
// installs the iteration once they are released. A synchronous save would
// wait for the writers until the test's deadline and fail.
func TestAsyncSaveWritesInBackground(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	release := make(chan struct{})
	old := writeShard
	t.Cleanup(func() { writeShard = old })
	writeShard = func(dir string, rank int, pieces []ckpt.PieceData) (ckpt.Shard, error) {
		select {
		case <-release:
			return old(dir, rank, pieces)
		case <-ctx.Done():
			return ckpt.Shard{}, errors.New("the writer was never released: the save did not return before its shards were written")
		}
	}
	a := mockArgs(1)
	a.WorldSize, a.Model.TensorModelParallelSize = 2, 2
	a.Save, a.AsyncSave = t.TempDir(), true
	ds, err := openData(a)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	err = local.NewWorld(2, comm.Options{}).Run(ctx, func(ctx context.Context, g comm.Group) error {
		tr, err := newTrainer(ctx, g, a, ds, 2, nil)
		if err != nil {
			return err
		}
		var installed []int
		tr.onSaved = func(it int) { installed = append(installed, it) }
		tr.iteration = 1
		if err := tr.save(ctx, true); err != nil {
			return err
		}
		if err := tr.finishSave(ctx, false); err != nil {
			return err
		}
		if _, err := ckpt.Latest(a.Save); err == nil || len(installed) != 0 || tr.saver.Pending() != 1 {
			return fmt.Errorf("rank %d: a checkpoint was installed (%v) before its shards were written", g.Rank(), installed)
		}
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		once.Do(func() { close(release) })
		if err := tr.finishSave(ctx, true); err != nil {
			return err
		}
		if it, err := ckpt.Latest(a.Save); err != nil || it != 1 || fmt.Sprint(installed) != "[1]" || tr.saver.Pending() != 0 {
			return fmt.Errorf("rank %d: after the writers finished: latest %d (%v), installed %v", g.Rank(), it, err, installed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAsyncSaveFailureStopsEveryRank: rank 1's background shard of
// iteration 4 fails; the run stops with its cause at the next finish, and
// iteration 2 stays the latest, intact.
func TestAsyncSaveFailureStopsEveryRank(t *testing.T) {
	old := writeShard
	t.Cleanup(func() { writeShard = old })
	writeShard = func(dir string, rank int, pieces []ckpt.PieceData) (ckpt.Shard, error) {
		if rank == 1 && strings.Contains(dir, "iter_0000004") {
			return ckpt.Shard{}, errors.New("no space left on device")
		}
		return old(dir, rank, pieces)
	}
	a := mockArgs(6)
	a.WorldSize, a.Model.TensorModelParallelSize = 2, 2
	a.Save, a.SaveInterval, a.AsyncSave = t.TempDir(), 2, true
	_, err := Run(context.Background(), a, Options{})
	if err == nil || !strings.Contains(err.Error(), "rank 1: no space left") || !strings.Contains(err.Error(), "the checkpoint of iteration 2 in "+a.Save+" is intact") {
		t.Fatalf("got %v, want the shard's error and the intact iteration", err)
	}
	if it, err := ckpt.Latest(a.Save); err != nil || it != 2 {
		t.Errorf("latest %d, %v; want 2", it, err)
	}
}
