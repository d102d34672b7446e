package train

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/ckpt/safetensors"
	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/mesh"
	"github.com/gotron/gotron/nn"
	"github.com/gotron/gotron/tensor"
)

// wholeTensors gathers, for every parameter of the whole model, the whole
// tensor of which of(p) is this rank's partition (its value, gradient or
// an optimizer moment) to world rank 0, under its Megatron name: each
// chunk's tensor-parallel partitions are gathered over TP
// (gpt.Model.FullTensors), then the pipeline stages of the first
// data-parallel replica send theirs to rank 0. The tied word embedding is
// taken once, from the first stage. Every rank must call it; ranks other
// than 0 get nil.
func (t *trainer) wholeTensors(ctx context.Context, of func(p *nn.Parameter) *tensor.Tensor) ([]safetensors.Tensor, error) {
	var mine, experts []safetensors.Tensor
	for _, c := range t.chunks {
		ts, err := c.FullTensors(ctx, of)
		if err != nil {
			return nil, err
		}
		for i, p := range c.Parameters() {
			switch {
			case p.Shared: // the first stage's copy is saved
			case !p.Allreduce:
				experts = append(experts, ts[i])
			default:
				mine = append(mine, ts[i])
			}
		}
	}
	experts, err := t.gatherExperts(ctx, experts)
	if err != nil {
		return nil, err
	}
	mine = append(mine, experts...)
	if t.pp.Size() == 1 {
		return mine, nil
	}
	if t.dpg.Rank() != 0 || t.tp.Rank() != 0 {
		return nil, nil // the first replica's TP rank 0 of each stage sends
	}
	if t.pp.Rank() != 0 {
		return nil, sendTensors(ctx, t.pp, mine)
	}
	all := mine
	for r := 1; r < t.pp.Size(); r++ {
		ts, err := recvTensors(ctx, t.pp, r)
		if err != nil {
			return nil, err
		}
		all = append(all, ts...)
	}
	return all, nil
}

// gatherExperts collects the whole expert tensors of every rank of the
// expert-parallel group (each holds its own experts) on its rank 0; the
// other ranks get nil.
func (t *trainer) gatherExperts(ctx context.Context, mine []safetensors.Tensor) ([]safetensors.Tensor, error) {
	ep := t.groups.Get(mesh.GroupEP)
	if ep == nil || ep.Size() == 1 {
		return mine, nil
	}
	if ep.Rank() != 0 {
		return nil, sendTensors(ctx, ep, mine)
	}
	for r := 1; r < ep.Size(); r++ {
		ts, err := recvTensors(ctx, ep, r)
		if err != nil {
			return nil, fmt.Errorf("gathering the experts: %w", err)
		}
		mine = append(mine, ts...)
	}
	return mine, nil
}

// sendTensors sends ts to group rank 0: a header of int64s (the count,
// then per tensor its name's length, its rank, its dims and the name's
// bytes), then every tensor's data as one float32 message.
func sendTensors(ctx context.Context, g comm.Group, ts []safetensors.Tensor) error {
	head := []int64{int64(len(ts))}
	n := 0
	for _, x := range ts {
		head = append(head, int64(len(x.Name)), int64(len(x.Shape)))
		for _, d := range x.Shape {
			head = append(head, int64(d))
		}
		for i := 0; i < len(x.Name); i++ {
			head = append(head, int64(x.Name[i]))
		}
		n += len(x.Data) / 4
	}
	body := make([]float32, 0, n)
	for _, x := range ts {
		v, err := x.Float32()
		if err != nil {
			return err
		}
		body = append(body, v...)
	}
	for _, m := range []struct {
		what string
		buf  comm.Buffer
	}{{"length", comm.I64([]int64{int64(len(head)), int64(len(body))})}, {"header", comm.I64(head)}, {"data", comm.F32(body)}} {
		if m.buf.Len() == 0 {
			continue // a stage without parameters sends no data
		}
		if err := g.Send(ctx, m.buf, 0); err != nil {
			return fmt.Errorf("sending the tensors (%s) to %s rank 0: %w", m.what, g.Name(), err)
		}
	}
	return nil
}

// recvTensors receives what sendTensors sent from group rank src.
func recvTensors(ctx context.Context, g comm.Group, src int) ([]safetensors.Tensor, error) {
	lens := make([]int64, 2)
	if err := g.Recv(ctx, comm.I64(lens), src); err != nil {
		return nil, fmt.Errorf("receiving %s rank %d's tensors: %w", g.Name(), src, err)
	}
	head, body := make([]int64, lens[0]), make([]float32, lens[1])
	if err := g.Recv(ctx, comm.I64(head), src); err != nil {
		return nil, fmt.Errorf("receiving %s rank %d's tensor names: %w", g.Name(), src, err)
	}
	if len(body) > 0 {
		if err := g.Recv(ctx, comm.F32(body), src); err != nil {
			return nil, fmt.Errorf("receiving %s rank %d's tensor data: %w", g.Name(), src, err)
		}
	}
	var out []safetensors.Tensor
	k, off := 1, 0
	for i := int64(0); i < head[0]; i++ {
		nameLen, rank := int(head[k]), int(head[k+1])
		k += 2
		shape := make([]int, rank)
		numel := 1
		for d := range shape {
			shape[d] = int(head[k])
			numel *= shape[d]
			k++
		}
		name := make([]byte, nameLen)
		for j := range name {
			name[j] = byte(head[k])
			k++
		}
		out = append(out, safetensors.F32(string(name), shape, body[off:off+numel]))
		off += numel
	}
	return out, nil
}
