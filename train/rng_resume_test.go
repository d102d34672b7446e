package train

import (
	"context"
	"fmt"
	"testing"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
)

// TestRNGStreamsFollowCoordinates saves a DP 2 run with dropout and loads
// it at DP 4: the replicas the saving run had continue their saved
// streams, the new ones start streams of their own (equal to no saved
// one); loaded at TP 2, where the streams cover other slices of the
// model, every rank starts afresh.
func TestRNGStreamsFollowCoordinates(t *testing.T) {
	a := mockArgs(4)
	a.Model.HiddenDropout, a.Model.AttentionDropout = 0.1, 0.1
	a.WorldSize, a.Save = 2, t.TempDir()
	if _, err := Run(context.Background(), a, Options{}); err != nil {
		t.Fatal(err)
	}
	r, err := ckpt.Open(a.Save)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	saved := map[string]bool{}
	byDP := map[int]string{}
	for _, rs := range r.Manifest.Ranks {
		saved[fmt.Sprint(rs.RNG)] = true
		byDP[rs.DP] = fmt.Sprint(rs.RNG)
	}
	for _, c := range []struct {
		name string
		tp   int
	}{{"dp4", 1}, {"tp2-dp2", 2}} {
		b := mockArgs(8)
		b.Model.HiddenDropout, b.Model.AttentionDropout = 0.1, 0.1
		b.WorldSize, b.Model.TensorModelParallelSize, b.Load = 4, c.tp, a.Save
		ds, err := openData(b)
		if err != nil {
			t.Fatal(err)
		}
		err = local.NewWorld(4, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
			tr, err := newTrainer(ctx, g, b, ds, 4, nil)
			if err != nil {
				return err
			}
			var states [][4]uint64
			flat := tr.rngStates()
			for i := 0; i < len(flat); i += 4 {
				states = append(states, [4]uint64{uint64(flat[i]), uint64(flat[i+1]), uint64(flat[i+2]), uint64(flat[i+3])})
			}
			got := fmt.Sprint(states)
			want, had := byDP[tr.dpRank]
			switch {
			case c.tp == 1 && had && got != want:
				return fmt.Errorf("%s, rank %d (replica %d): the saved replica's streams were not continued", c.name, g.Rank(), tr.dpRank)
			case (c.tp != 1 || !had) && saved[got]:
				return fmt.Errorf("%s, rank %d (replica %d): continues a saved stream %s it does not own", c.name, g.Rank(), tr.dpRank, got)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
