// Package local runs the ranks of a world as goroutines of one process that
// communicate through shared memory: gotron's embedded default backend of
// comm.Group.
//
//	w := local.NewWorld(4, comm.Options{})
//	err := w.Run(ctx, func(ctx context.Context, g comm.Group) error {
//		x := []float32{float32(g.Rank())}
//		return g.AllReduce(ctx, comm.F32(x), comm.Sum) // x[0] = 0+1+2+3
//	})
//
// # How operations meet
//
// Every operation is a rendezvous without copies: each member publishes its
// buffers, waits until all members have arrived, does its share reading and
// writing the other members' buffers directly, and waits until all are done
// before returning. AllReduce is a reduce-scatter and an all-gather in one
// pass: the buffers are cut into one chunk per member and the chunks into
// 64 KiB blocks; member p reduces the blocks of chunk p of every member's
// buffer, in rank order, writing each result into every buffer while it is
// in registers, then helps with the blocks left in the other chunks. So n
// members reduce in parallel, a member that is late to start does not hold
// up the others, and the result is bitwise the same whatever the timing. A
// point-to-point message is copied by its receiver straight from the
// sender's buffer.
//
// Waits block on channels and end with the call's context,
// comm.Options.Timeout, or a failure anywhere in the world. When the world
// has no more ranks than GOMAXPROCS, a waiter first polls for some
// microseconds (yielding the processor between polls) so that ranks woken
// together compute together; nothing polls longer. Meeting points are
// recycled, so a blocking collective allocates nothing once warm.
//
// Members' buffers must not overlap one another: in one process nothing
// stops two ranks from passing the same slice, but the result is undefined.
package local
