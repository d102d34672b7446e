package train

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
)

// BenchmarkCheckpoint saves and loads the medium benchmark model's
// checkpoint (float32 weights and both Adam moments, about 280 MB) on one
// rank and on four in-process ranks that all write (TP 4; DP 4 with the
// distributed optimizer), and reports the rate in MB/s of checkpoint
// bytes: save includes the shards' and the directory's fsyncs; load reads
// through the page cache the save left warm. Each round then saves again
// with --async-save and reports the time training is blocked (the save
// returning, its pieces copied) and the time until the iteration is
// installed (a blocking finish right away), per save, in milliseconds;
// blocked-ms is what a synchronous save costs training.
//
//	go test -run '^$' -bench Checkpoint -benchtime 3x ./train
func BenchmarkCheckpoint(b *testing.B) {
	distOpt := config.DefaultDDPConfig()
	distOpt.UseDistributedOptimizer = true
	for _, c := range []struct {
		name  string
		world int
		tp    int
		ddp   config.DDPConfig
	}{
		{"one-rank", 1, 1, defaultDDP()},
		{"tp4", 4, 4, defaultDDP()},
		{"dp4-distopt", 4, 1, distOpt},
	} {
		b.Run(c.name, func(b *testing.B) {
			a := mediumArgs(c.world, c.tp, c.ddp)
			a.Save, a.Load = b.TempDir(), ""
			ds, err := openData(a)
			if err != nil {
				b.Fatal(err)
			}
			var save, load, blocked, installed time.Duration
			err = local.NewWorld(c.world, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
				t, err := newTrainer(ctx, g, a, ds, c.world, nil)
				if err != nil {
					return err
				}
				t.iteration = 1
				for i := 0; i < b.N; i++ {
					if err := g.Barrier(ctx); err != nil {
						return err
					}
					start := time.Now()
					if err := t.save(ctx, false); err != nil {
						return err
					}
					if err := g.Barrier(ctx); err != nil {
						return err
					}
					if g.Rank() == 0 {
						save += time.Since(start)
					}
					t.a.Load = a.Save
					start = time.Now()
					if err := t.resume(); err != nil {
						return err
					}
					if err := g.Barrier(ctx); err != nil {
						return err
					}
					if g.Rank() == 0 {
						load += time.Since(start)
					}

					if err := g.Barrier(ctx); err != nil {
						return err
					}
					start = time.Now()
					if err := t.save(ctx, true); err != nil {
						return err
					}
					if err := g.Barrier(ctx); err != nil {
						return err
					}
					if g.Rank() == 0 {
						blocked += time.Since(start)
					}
					if err := t.finishSave(ctx, true); err != nil {
						return err
					}
					if g.Rank() == 0 {
						installed += time.Since(start)
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			size := dirBytes(b, ckptIterDir(a.Save))
			b.ReportMetric(float64(size)/1e6, "MB")
			b.ReportMetric(float64(size)*float64(b.N)/1e6/save.Seconds(), "save-MB/s")
			b.ReportMetric(float64(size)*float64(b.N)/1e6/load.Seconds(), "load-MB/s")
			b.ReportMetric(save.Seconds()*1e3/float64(b.N), "blocked-ms")
			b.ReportMetric(blocked.Seconds()*1e3/float64(b.N), "async-blocked-ms")
			b.ReportMetric(installed.Seconds()*1e3/float64(b.N), "async-installed-ms")
		})
	}
}

// mediumArgs are the arguments of gotron bench's medium model (6 layers,
// hidden 512, 8 heads, sequence 512, vocabulary 8192, micro-batch 4) on
// mock data for a world of n ranks at tensor-parallel size tp.
func mediumArgs(n, tp int, ddp config.DDPConfig) Args {
	a := DefaultArgs()
	m := &a.Model
	m.NumLayers, m.HiddenSize, m.NumAttentionHeads = 6, 512, 8
	m.SeqLength, m.MaxPositionEmbeddings, m.VocabSize = 512, 512, 8192
	m.HiddenDropout, m.AttentionDropout, m.TensorModelParallelSize = 0, 0, tp
	a.DDP, a.MicroBatchSize, a.MockData, a.EvalIters, a.WorldSize = ddp, 4, true, 0, n
	return normalise(a, n)
}

// ckptIterDir is the first iteration directory under dir.
func ckptIterDir(dir string) string {
	m, _ := filepath.Glob(filepath.Join(dir, "iter_*"))
	if len(m) == 0 {
		return dir
	}
	return m[0]
}

// dirBytes sums the sizes of the files in dir.
func dirBytes(b *testing.B, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}
