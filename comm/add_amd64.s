#include "textflag.h"

// func addTo(dst, x, y []float32)
// dst[i] = x[i] + y[i] for i < len(dst); x and y are at least as long.
// Each group of elements is loaded before it is stored, so dst may be x or y.
TEXT ·addTo(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	MOVQ y_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	SHRQ $4, BX
	JZ   to_tail

to_loop16:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	MOVUPS 32(SI)(AX*4), X2
	MOVUPS 48(SI)(AX*4), X3
	MOVUPS (DX)(AX*4), X4
	MOVUPS 16(DX)(AX*4), X5
	MOVUPS 32(DX)(AX*4), X6
	MOVUPS 48(DX)(AX*4), X7
	ADDPS  X4, X0
	ADDPS  X5, X1
	ADDPS  X6, X2
	ADDPS  X7, X3
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	MOVUPS X2, 32(DI)(AX*4)
	MOVUPS X3, 48(DI)(AX*4)
	ADDQ   $16, AX
	DECQ   BX
	JNZ    to_loop16

to_tail:
	CMPQ  AX, CX
	JGE   to_done
	MOVSS (SI)(AX*4), X0
	ADDSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ  AX
	JMP   to_tail

to_done:
	RET

// func addDup(d0, d1, x, y []float32)
// d0[i] = d1[i] = x[i] + y[i] for i < len(d0); d1, x and y are at least as
// long. Each group of elements is loaded before it is stored, so d0 and d1
// may be x and y.
TEXT ·addDup(SB), NOSPLIT, $0-96
	MOVQ d0_base+0(FP), DI
	MOVQ d0_len+8(FP), CX
	MOVQ d1_base+24(FP), R8
	MOVQ x_base+48(FP), SI
	MOVQ y_base+72(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	SHRQ $4, BX
	JZ   dup_tail

dup_loop16:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	MOVUPS 32(SI)(AX*4), X2
	MOVUPS 48(SI)(AX*4), X3
	MOVUPS (DX)(AX*4), X4
	MOVUPS 16(DX)(AX*4), X5
	MOVUPS 32(DX)(AX*4), X6
	MOVUPS 48(DX)(AX*4), X7
	ADDPS  X4, X0
	ADDPS  X5, X1
	ADDPS  X6, X2
	ADDPS  X7, X3
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	MOVUPS X2, 32(DI)(AX*4)
	MOVUPS X3, 48(DI)(AX*4)
	MOVUPS X0, (R8)(AX*4)
	MOVUPS X1, 16(R8)(AX*4)
	MOVUPS X2, 32(R8)(AX*4)
	MOVUPS X3, 48(R8)(AX*4)
	ADDQ   $16, AX
	DECQ   BX
	JNZ    dup_loop16

dup_tail:
	CMPQ  AX, CX
	JGE   dup_done
	MOVSS (SI)(AX*4), X0
	ADDSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	MOVSS X0, (R8)(AX*4)
	INCQ  AX
	JMP   dup_tail

dup_done:
	RET
