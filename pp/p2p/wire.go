package p2p

import (
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor"
	"github.com/gotron/gotron/tensor/kernels"
)

// msg is one op's message: the buffer comm moves and, for a receive in a
// 16-bit pipeline dtype, the step that widens it into the tensor once the
// message has arrived.
type msg struct {
	buf    comm.Buffer
	finish func()
}

// sendMsg returns the message carrying t in the pipeline dtype. A float32
// message is t's own memory (a contiguous copy if t is a strided view); a
// 16-bit one is a fresh buffer rounded to nearest, ties to even.
func (c *Communicator) sendMsg(t *tensor.Tensor) *msg {
	src := t.Contiguous().Data()
	switch c.cfg.PipelineDType {
	case config.BFloat16:
		u := make([]uint16, len(src))
		kernels.F32ToBF16(u, src)
		return &msg{buf: comm.BF16(u)}
	case config.Float16:
		u := make([]uint16, len(src))
		kernels.F32ToF16(u, src)
		return &msg{buf: comm.F16(u)}
	}
	return &msg{buf: comm.F32(src)}
}

// recvMsg allocates the tensor of the given shape that a receive fills and
// returns it with its message: the tensor's own memory for float32, else a
// 16-bit buffer widened exactly into the tensor by finish.
func (c *Communicator) recvMsg(shape []int) (*tensor.Tensor, *msg) {
	t := tensor.New(shape...)
	switch c.cfg.PipelineDType {
	case config.BFloat16:
		u := make([]uint16, t.Len())
		return t, &msg{buf: comm.BF16(u), finish: func() { kernels.BF16ToF32(t.Data(), u) }}
	case config.Float16:
		u := make([]uint16, t.Len())
		return t, &msg{buf: comm.F16(u), finish: func() { kernels.F16ToF32(t.Data(), u) }}
	}
	return t, &msg{buf: comm.F32(t.Data())}
}

// Shape messages are three int64s, (s, b, h), as in the reference.
const shapeLen = 3

// shapeMsg returns the message carrying t's shape.
func shapeMsg(t *tensor.Tensor) *msg {
	s := make([]int64, shapeLen)
	for i, d := range t.Shape() {
		s[i] = int64(d)
	}
	return &msg{buf: comm.I64(s)}
}

// HandOver returns what a neighbour receives when t is sent to it: a
// fresh tensor of t's shape holding t's values after the trip through the
// pipeline dtype (rounded to nearest, ties to even, and widened back for
// a 16-bit one). A schedule that places two neighbouring stages on one
// rank (the V placement) passes the tensor between them so, with no
// message, and the boundary means what it means between two ranks.
func (c *Communicator) HandOver(t *tensor.Tensor) *tensor.Tensor {
	src := t.Contiguous().Data()
	out := tensor.Empty(t.Shape()...)
	dst := out.Data()
	switch c.cfg.PipelineDType {
	case config.BFloat16:
		u := make([]uint16, len(src))
		kernels.F32ToBF16(u, src)
		kernels.BF16ToF32(dst, u)
	case config.Float16:
		u := make([]uint16, len(src))
		kernels.F32ToF16(u, src)
		kernels.F16ToF32(dst, u)
	default:
		copy(dst, src)
	}
	return out
}
