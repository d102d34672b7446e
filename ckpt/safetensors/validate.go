package safetensors

import (
	"encoding/json"
	"fmt"
	"sort"
)

// parseEntry decodes and checks the header entry of tensor key: the three fields present,
// a known dtype, a shape whose element count and byte length product(shape)·elemsize fit
// in an int (see [shapeSize]), two ordered non-negative offsets spanning exactly that many
// bytes.
func parseEntry(key string, raw json.RawMessage, name string) (parsedTensor, error) {
	var e headerEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return parsedTensor{}, fmt.Errorf("%s: malformed JSON header: tensor %q: %v: the file is corrupt; re-create it", name, key, err)
	}
	var missing []string
	if e.DType == nil {
		missing = append(missing, "dtype")
	}
	if e.Shape == nil {
		missing = append(missing, "shape")
	}
	if e.DataOffsets == nil {
		missing = append(missing, "data_offsets")
	}
	if len(missing) > 0 {
		return parsedTensor{}, fmt.Errorf("%s: malformed JSON header: tensor %q has no %v (an entry needs dtype, shape and data_offsets): the file is corrupt; re-create it", name, key, missing)
	}
	dt := DType(*e.DType)
	if !dt.Valid() {
		return parsedTensor{}, fmt.Errorf("%s: tensor %q has dtype %q, which is not a safetensors dtype (known: %s): the file was written by an incompatible tool; convert it to one of these", name, key, dt, knownDTypes)
	}
	numel, nbytes, err := shapeSize(*e.Shape, dt.ElemSize())
	if err != nil {
		return parsedTensor{}, fmt.Errorf("%s: tensor %q of dtype %s has shape %v: %v: the header is corrupt; re-create the file", name, key, dt, *e.Shape, err)
	}
	shape := make([]int, len(*e.Shape))
	for i, d := range *e.Shape {
		shape[i] = int(d) // fits: d <= product of the non-zero dimensions <= math.MaxInt
	}
	offs := *e.DataOffsets
	if len(offs) != 2 {
		return parsedTensor{}, fmt.Errorf("%s: tensor %q has %d data_offsets %v, want 2 ([begin, end]): the header is corrupt; re-create the file", name, key, len(offs), offs)
	}
	begin, end := offs[0], offs[1]
	if begin < 0 || end < begin {
		return parsedTensor{}, fmt.Errorf("%s: tensor %q has data_offsets [%d, %d] out of range (want 0 <= begin <= end): the header is corrupt; re-create the file", name, key, begin, end)
	}
	if end-begin != nbytes { // no overflow: 0 <= begin <= end
		return parsedTensor{}, fmt.Errorf("%s: tensor %q of dtype %s and shape %v needs %d·%d = %d bytes but its data_offsets [%d, %d] span %d: the header is corrupt; re-create the file",
			name, key, dt, shape, numel, dt.ElemSize(), nbytes, begin, end, end-begin)
	}
	return parsedTensor{Tensor: Tensor{Name: key, DType: dt, Shape: shape}, begin: begin, end: end}, nil
}

// checkLayout checks that every tensor lies within the data section of dataLen bytes and
// that no two non-empty tensors overlap.
func checkLayout(tensors []parsedTensor, dataLen int64, name string) error {
	for _, t := range tensors {
		if t.end > dataLen {
			return fmt.Errorf("%s: tensor %s needs bytes [%d,%d) but the data section has only %d bytes: the file is truncated; re-create it", name, t.Name, t.begin, t.end, dataLen)
		}
	}
	byOffset := make([]parsedTensor, 0, len(tensors))
	for _, t := range tensors {
		if t.end > t.begin {
			byOffset = append(byOffset, t)
		}
	}
	sort.SliceStable(byOffset, func(i, j int) bool { return byOffset[i].begin < byOffset[j].begin })
	for i := 1; i < len(byOffset); i++ {
		a, b := byOffset[i-1], byOffset[i]
		if b.begin < a.end {
			return fmt.Errorf("%s: tensors %s at bytes [%d,%d) and %s at bytes [%d,%d) overlap: the header is corrupt; re-create the file", name, a.Name, a.begin, a.end, b.Name, b.begin, b.end)
		}
	}
	return nil
}
