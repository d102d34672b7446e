package comm_test

import (
	"fmt"

	"github.com/gotron/gotron/comm"
)

// Reduce folds inputs in order with float32 accumulation and one rounding:
// three bfloat16 inputs 1, 2⁻⁸ and 2⁻⁸ sum to 1 + 2⁻⁷, which bfloat16
// holds, although adding them one at a time in bfloat16 would give 1.
func ExampleReduce() {
	one, tiny := comm.F32ToBF16(1), comm.F32ToBF16(1.0/256)
	ins := []comm.Buffer{
		comm.BF16([]uint16{one}),
		comm.BF16([]uint16{tiny}),
		comm.BF16([]uint16{tiny}),
	}
	out := comm.BF16(make([]uint16, 1))
	comm.Reduce(comm.Sum, []comm.Buffer{out}, ins)
	fmt.Println(comm.BF16ToF32(out.Uint16s()[0]), 1+1.0/128)
	// Output: 1.0078125 1.0078125
}
