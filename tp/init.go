package tp

import (
	"fmt"

	"github.com/gotron/gotron/tensor"
)

// InitMethod fills a whole (master) weight in place, drawing from the
// generator it closes over (Megatron's init_method).
type InitMethod func(master *tensor.Tensor)

// InitializeAffineWeightCPU fills weight, this rank's partition of a
// master weight [outSize, inSize], the way Megatron's
// _initialize_affine_weight_cpu does (docs/SEMANTICS.md § Vocabulary split
// and weight initialisation):
//
//  1. the master weight [outSize, inSize] is drawn whole by init;
//  2. it is split along partitionDim into chunks of perPartition/stride;
//  3. this rank keeps chunks rank, rank+ws, rank+2·ws, … (weight_list[rank::ws]),
//     concatenated in order, and copies them into weight.
//
// Every rank therefore starts from slices of the same master weight,
// whatever the TP size: gotron always initialises this way (DECISIONS.md,
// "Initialisation"). weight must have the shape of the partition
// ([perPartition, inSize] for partitionDim 0, [outSize, perPartition] for
// 1). The master weight is returned when returnMaster is set (Megatron's
// keep_master_weight_for_test), else nil.
func InitializeAffineWeightCPU(weight *tensor.Tensor, outSize, inSize, perPartition, partitionDim int, init InitMethod, stride, rank, ws int, returnMaster bool) (*tensor.Tensor, error) {
	if partitionDim != 0 && partitionDim != 1 {
		return nil, fmt.Errorf("tp: initialize affine weight: partition dim %d, want 0 or 1", partitionDim)
	}
	if stride < 1 || perPartition%stride != 0 {
		return nil, fmt.Errorf("tp: initialize affine weight: the partition size %d is not divisible by stride %d", perPartition, stride)
	}
	full := []int{outSize, inSize}
	if full[partitionDim] != perPartition*ws {
		return nil, fmt.Errorf("tp: initialize affine weight: dim %d of [%d, %d] is not %d partitions of %d", partitionDim, outSize, inSize, ws, perPartition)
	}
	want := append([]int(nil), full...)
	want[partitionDim] = perPartition
	if weight.Rank() != 2 || weight.Dim(0) != want[0] || weight.Dim(1) != want[1] {
		return nil, fmt.Errorf("tp: initialize affine weight: the rank's weight is %v, want %v", weight.Shape(), want)
	}
	master := tensor.New(outSize, inSize)
	init(master)
	chunk := perPartition / stride
	var mine []*tensor.Tensor
	for k := rank; k*chunk < full[partitionDim]; k += ws {
		mine = append(mine, master.Narrow(partitionDim, k*chunk, chunk))
	}
	weight.CopyFrom(tensor.Cat(partitionDim, mine...))
	if returnMaster {
		return master, nil
	}
	return nil, nil
}
