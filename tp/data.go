package tp

import (
	"context"
	"fmt"

	"github.com/gotron/gotron/comm"
)

// MaxDataDim is the most dimensions a tensor given to BroadcastData may
// have (Megatron's _MAX_DATA_DIM).
const MaxDataDim = 5

// DataTensor is a tensor of any element type a collective carries, as
// BroadcastData moves it: its shape and its elements, row-major, in a
// comm.Buffer (comm.I64 for token ids, labels and position ids, comm.F32
// for loss and attention masks). Buf.Len() is the product of Shape.
type DataTensor struct {
	Shape []int
	Buf   comm.Buffer
}

// The status codes of BroadcastData's header: rank 0 validates its data
// and every rank reports the same error.
const (
	dataOK = iota
	dataMissingKey
	dataTooManyDims
	dataBadShape
	dataWrongDType
	dataInvalidDType
)

// dataHeaderFixed is the header's fixed part: status, key index, detail,
// dtype. Each key then takes 1 + MaxDataDim entries: its number of
// dimensions and the dimensions.
const dataHeaderFixed = 4

// BroadcastData sends data[key] for every key, held by rank 0 of g, to
// every rank of g (broadcast_data, docs/SEMANTICS.md § broadcast_data). Every
// rank calls it with the same keys and dtype; data is read on rank 0 only
// (the other ranks may pass nil). It returns, on every rank including rank 0,
// one tensor per key with rank 0's shape and elements, all slices of one new
// flat buffer of dtype.
//
// It runs two broadcasts from group rank 0:
//
//  1. a header of int64s: a status, then for each key its number of
//     dimensions n ≤ MaxDataDim and its sizes (len(keys)·(1+MaxDataDim)
//     entries after the status);
//  2. the keys' elements concatenated in key order (Σ numel elements of
//     dtype), skipped when that is zero.
//
// Rank 0 validates before anything is sent: every key must be present,
// have at most MaxDataDim dimensions, non-negative sizes whose product is
// Buf.Len(), and dtype ("KEY has data type D which is different than
// DTYPE"). A failure is carried in the header's status, so every rank
// returns the same error instead of waiting for data that never comes. A
// rank passing a dtype other than rank 0's still takes part in the second
// broadcast (so none hangs) and then returns an error.
//
// Departures from the reference, both deliberate: the header stores each
// tensor's number of dimensions, so a zero-sized dimension is sent as is
// ([2, 0, 3] arrives as [2, 0, 3]; the reference reads sizes up to the
// first 0 and would deliver [2], misplacing the data of every later key),
// and a tensor may have all MaxDataDim = 5 dimensions (the reference needs
// a terminating 0 and so takes at most 4). A scalar has zero dimensions
// and one element.
func BroadcastData(ctx context.Context, g comm.Group, keys []string, data map[string]DataTensor, dtype comm.DType) (map[string]DataTensor, error) {
	const slot = 1 + MaxDataDim
	ws, rank := worldSize(g), rankOf(g)
	hdr := make([]int64, dataHeaderFixed+len(keys)*slot)
	if rank == 0 {
		packDataHeader(hdr, keys, data, dtype)
	}
	if ws > 1 {
		if err := g.Broadcast(ctx, comm.I64(hdr), 0); err != nil {
			return nil, fmt.Errorf("tp: broadcast data: sizes from rank 0 of %s: %w", groupName(g), err)
		}
	}
	if hdr[0] != dataOK {
		return nil, dataHeaderError(g, keys, hdr)
	}
	srcType := comm.DType(hdr[3])

	shapes := make([][]int, len(keys))
	offsets := make([]int, len(keys)+1)
	for i := range keys {
		e := hdr[dataHeaderFixed+i*slot:][:slot]
		shape := make([]int, e[0])
		n := 1
		for d := range shape {
			shape[d] = int(e[1+d])
			n *= shape[d]
		}
		shapes[i] = shape
		offsets[i+1] = offsets[i] + n
	}
	total := offsets[len(keys)]

	flat := comm.NewBuffer(srcType, total)
	if rank == 0 {
		for i, k := range keys {
			flat.Slice(offsets[i], offsets[i+1]).CopyFrom(data[k].Buf)
		}
	}
	if ws > 1 && total > 0 {
		if err := g.Broadcast(ctx, flat, 0); err != nil {
			return nil, fmt.Errorf("tp: broadcast data: %d elements of %v from rank 0 of %s: %w", total, srcType, groupName(g), err)
		}
	}
	if srcType != dtype {
		return nil, fmt.Errorf("tp: broadcast data: rank %d of %s asked for %v data but rank 0 sent %v; pass the same dtype on every rank", rank, groupName(g), dtype, srcType)
	}
	out := make(map[string]DataTensor, len(keys))
	for i, k := range keys {
		out[k] = DataTensor{Shape: shapes[i], Buf: flat.Slice(offsets[i], offsets[i+1])}
	}
	return out, nil
}

// packDataHeader fills hdr on rank 0: the dtype, each key's dimensions,
// or the first validation failure as status, key index and detail.
func packDataHeader(hdr []int64, keys []string, data map[string]DataTensor, dtype comm.DType) {
	const slot = 1 + MaxDataDim
	hdr[3] = int64(dtype)
	fail := func(code, key int, detail int64) {
		hdr[0], hdr[1], hdr[2] = int64(code), int64(key), detail
	}
	if !dtype.Valid() {
		fail(dataInvalidDType, 0, int64(dtype))
		return
	}
	for i, k := range keys {
		d, ok := data[k]
		if !ok {
			fail(dataMissingKey, i, 0)
			return
		}
		if len(d.Shape) > MaxDataDim {
			fail(dataTooManyDims, i, int64(len(d.Shape)))
			return
		}
		n := 1
		for _, s := range d.Shape {
			if s < 0 {
				n = -1
				break
			}
			n *= s
		}
		if n != d.Buf.Len() {
			fail(dataBadShape, i, int64(d.Buf.Len()))
			return
		}
		if d.Buf.DType() != dtype {
			fail(dataWrongDType, i, int64(d.Buf.DType()))
			return
		}
		e := hdr[dataHeaderFixed+i*slot:][:slot]
		e[0] = int64(len(d.Shape))
		for j, s := range d.Shape {
			e[1+j] = int64(s)
		}
	}
}

// dataHeaderError turns a failed header into the error every rank
// returns.
func dataHeaderError(g comm.Group, keys []string, hdr []int64) error {
	pre := fmt.Sprintf("tp: broadcast data from rank 0 of %s", groupName(g))
	dtype := comm.DType(hdr[3])
	key := ""
	if i := int(hdr[1]); i >= 0 && i < len(keys) {
		key = keys[i]
	}
	switch hdr[0] {
	case dataMissingKey:
		return fmt.Errorf("%s: key %q is not in rank 0's data; give rank 0 a tensor for every key", pre, key)
	case dataTooManyDims:
		return fmt.Errorf("%s: %q has %d dimensions, more than MaxDataDim = %d; flatten it first", pre, key, hdr[2], MaxDataDim)
	case dataBadShape:
		return fmt.Errorf("%s: %q has a shape with a negative size or one that does not hold its %d elements; make Shape match Buf", pre, key, hdr[2])
	case dataWrongDType:
		return fmt.Errorf("%s: %q has data type %v which is different than %v", pre, key, comm.DType(hdr[2]), dtype)
	case dataInvalidDType:
		return fmt.Errorf("%s: invalid dtype %v; ask for comm.Int64, Float32, BFloat16 or Float16", pre, comm.DType(hdr[2]))
	}
	return fmt.Errorf("%s: unknown header status %d", pre, hdr[0])
}
