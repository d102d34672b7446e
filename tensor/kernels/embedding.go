package kernels

import "fmt"

// EmbeddingForward gathers rows of table: out[i,:] = table[ids[i],:] for table
// [numEmbeddings, dim], ids [n], out [n, dim] (torch.nn.functional.embedding). Panics if an
// id is outside [0, numEmbeddings) or a length does not match (programmer bugs: token ids are
// validated where data is read). out must not overlap table.
func EmbeddingForward(out, table []float32, ids []int32, dim int) {
	const op = "EmbeddingForward"
	numEmb := checkEmbedding(op, table, ids, dim)
	needLen(op, "out", len(out), len(ids)*dim, "len(ids)·dim")
	for i, id := range ids {
		checkID(op, i, id, numEmb)
		copy(out[i*dim:i*dim+dim], table[int(id)*dim:int(id)*dim+dim])
	}
}

// EmbeddingBackward scatters the output gradient back into the table's gradient:
// dtable[ids[i],:] += dout[i,:], for i = 0, 1, ... in order, in float32. A repeated id
// accumulates its rows in that fixed order, so the result is deterministic. Shapes as
// [EmbeddingForward]; dtable is accumulated, not overwritten, and must not overlap dout.
// Panics on a bad id or length (programmer bugs).
func EmbeddingBackward(dtable, dout []float32, ids []int32, dim int) {
	const op = "EmbeddingBackward"
	numEmb := checkEmbedding(op, dtable, ids, dim)
	needLen(op, "dout", len(dout), len(ids)*dim, "len(ids)·dim")
	for i, id := range ids {
		checkID(op, i, id, numEmb)
		AddInto(dtable[int(id)*dim:int(id)*dim+dim], dout[i*dim:i*dim+dim])
	}
}

// checkEmbedding validates dim and the table length and returns the number of rows.
func checkEmbedding(op string, table []float32, ids []int32, dim int) int {
	if dim <= 0 || len(table)%dim != 0 {
		panic(fmt.Sprintf("kernels.%s: dim = %d with a table of %d values: want dim > 0 dividing the table length", op, dim, len(table)))
	}
	needShape(op, len(ids), dim)
	return len(table) / dim
}

// checkID panics unless 0 ≤ id < numEmb.
func checkID(op string, i int, id int32, numEmb int) {
	if id < 0 || int(id) >= numEmb {
		panic(fmt.Sprintf("kernels.%s: ids[%d] = %d, want 0 ≤ id < %d (the table's rows)", op, i, id, numEmb))
	}
}
