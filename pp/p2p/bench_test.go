package p2p

import (
	"context"
	"fmt"
	"testing"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/local"
	"github.com/gotron/gotron/config"
)

// pingPongSizes are the message sizes of BenchmarkPingPong, in bytes of the
// float32 tensor.
var pingPongSizes = []struct {
	name  string
	bytes int
}{{"4KB", 4 << 10}, {"64KB", 64 << 10}, {"1MB", 1 << 20}, {"16MB", 16 << 20}}

// BenchmarkPingPong times a round trip between two stages on comm/local:
// stage 0 sends an activation forward (SendForward) and receives a
// gradient of the same size back (RecvBackward); stage 1 does the
// opposite. ns/op is one round trip; MB/s is the one-way bandwidth, the two
// messages' bytes over the round trip. Each receive allocates its tensor, as
// the communicator does. Under bfloat16 the wire carries half the bytes and
// the conversions are timed too; MB/s still counts the float32 tensor.
func BenchmarkPingPong(b *testing.B) {
	for _, dt := range []config.DType{config.Float32, config.BFloat16} {
		for _, size := range pingPongSizes {
			b.Run(fmt.Sprintf("%v/%s", dt, size.name), func(b *testing.B) {
				shape := []int{size.bytes / 4 / 1024, 1, 1024}
				if size.bytes < 4*1024 {
					shape = []int{1, 1, size.bytes / 4}
				}
				x := payload(0, fwd, 0, shape...)
				cfg := Config{PipelineDType: dt, BatchP2PComm: true}
				b.SetBytes(int64(2 * size.bytes))
				b.ReportAllocs()
				b.ResetTimer()
				err := local.NewWorld(2, comm.Options{}).Run(context.Background(), func(ctx context.Context, g comm.Group) error {
					c, err := New(g, cfg)
					if err != nil {
						return err
					}
					for range b.N {
						if c.IsFirstStage() {
							if err := c.SendForward(ctx, x, false); err != nil {
								return err
							}
							if _, err := c.RecvBackward(ctx, shape, false); err != nil {
								return err
							}
						} else {
							y, err := c.RecvForward(ctx, shape, false)
							if err != nil {
								return err
							}
							if err := c.SendBackward(ctx, y, false); err != nil {
								return err
							}
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
