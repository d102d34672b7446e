package p2p

import (
	"context"
	"math"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/internal/numtest"
	"github.com/gotron/gotron/tensor"
)

// TestHandOverIsTheWire: what HandOver gives a stage on the same rank is
// what the next rank receives when the tensor is sent, bit for bit, in
// every pipeline dtype, and it is fresh memory.
func TestHandOverIsTheWire(t *testing.T) {
	for _, d := range []config.DType{config.Float32, config.BFloat16, config.Float16} {
		x := tensor.New(4, 2, 3)
		for i, v := 0, x.Data(); i < len(v); i++ {
			v[i] = float32(math.Sin(float64(i)*1.7)) * 3.3
		}
		var sent, received []float32
		mustRun(t, 2, Config{PipelineDType: d}, func(ctx context.Context, c *Communicator) error {
			if c.Stage() == 0 {
				h := c.HandOver(x)
				if &h.Data()[0] == &x.Data()[0] {
					t.Errorf("%v: HandOver returned the tensor's own memory", d)
				}
				sent = h.Data()
				_, _, _, err := c.Communicate(ctx, Exchange{SendNext: x})
				return err
			}
			got, _, _, err := c.Communicate(ctx, Exchange{RecvPrev: true, Shape: x.Shape()})
			if err == nil {
				received = got.Data()
			}
			return err
		})
		numtest.SameBits(t, d.String()+": handed over against received", sent, received)
	}
}
