#include "textflag.h"

// The float32 addition kernels of add_amd64.go: an SSE form (any amd64) and
// an AVX2 form. Each group of elements is loaded before it is stored, so a
// destination may be the same memory as an input (not a shifted overlap).
// Registers: DI, R8 destinations; SI, DX inputs; AX index; CX length.

// func addToSSE(dst, x, y []float32)
TEXT ·addToSSE(SB), NOSPLIT, $0-72
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

// func addDupSSE(d0, d1, x, y []float32)
TEXT ·addDupSSE(SB), NOSPLIT, $0-96
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

// func addToAVX2(dst, x, y []float32)
TEXT ·addToAVX2(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	MOVQ y_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	SHRQ $5, BX
	JZ   vto_by8

vto_loop32:
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS 64(SI)(AX*4), Y2
	VMOVUPS 96(SI)(AX*4), Y3
	VADDPS  (DX)(AX*4), Y0, Y0
	VADDPS  32(DX)(AX*4), Y1, Y1
	VADDPS  64(DX)(AX*4), Y2, Y2
	VADDPS  96(DX)(AX*4), Y3, Y3
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	ADDQ    $32, AX
	DECQ    BX
	JNZ     vto_loop32

vto_by8:
	MOVQ CX, BX
	SUBQ AX, BX
	SHRQ $3, BX
	JZ   vto_tail

vto_loop8:
	VMOVUPS (SI)(AX*4), Y0
	VADDPS  (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	DECQ    BX
	JNZ     vto_loop8

vto_tail:
	VZEROUPPER

vto_tail1:
	CMPQ  AX, CX
	JGE   vto_done
	MOVSS (SI)(AX*4), X0
	ADDSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ  AX
	JMP   vto_tail1

vto_done:
	RET

// func addDupAVX2(d0, d1, x, y []float32)
TEXT ·addDupAVX2(SB), NOSPLIT, $0-96
	MOVQ d0_base+0(FP), DI
	MOVQ d0_len+8(FP), CX
	MOVQ d1_base+24(FP), R8
	MOVQ x_base+48(FP), SI
	MOVQ y_base+72(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	SHRQ $5, BX
	JZ   vdup_by8

vdup_loop32:
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y1
	VMOVUPS 64(SI)(AX*4), Y2
	VMOVUPS 96(SI)(AX*4), Y3
	VADDPS  (DX)(AX*4), Y0, Y0
	VADDPS  32(DX)(AX*4), Y1, Y1
	VADDPS  64(DX)(AX*4), Y2, Y2
	VADDPS  96(DX)(AX*4), Y3, Y3
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	VMOVUPS Y0, (R8)(AX*4)
	VMOVUPS Y1, 32(R8)(AX*4)
	VMOVUPS Y2, 64(R8)(AX*4)
	VMOVUPS Y3, 96(R8)(AX*4)
	ADDQ    $32, AX
	DECQ    BX
	JNZ     vdup_loop32

vdup_by8:
	MOVQ CX, BX
	SUBQ AX, BX
	SHRQ $3, BX
	JZ   vdup_tail

vdup_loop8:
	VMOVUPS (SI)(AX*4), Y0
	VADDPS  (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y0, (R8)(AX*4)
	ADDQ    $8, AX
	DECQ    BX
	JNZ     vdup_loop8

vdup_tail:
	VZEROUPPER

vdup_tail1:
	CMPQ  AX, CX
	JGE   vdup_done
	MOVSS (SI)(AX*4), X0
	ADDSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	MOVSS X0, (R8)(AX*4)
	INCQ  AX
	JMP   vdup_tail1

vdup_done:
	RET

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv0() (eax uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-4
	XORL CX, CX
	XGETBV
	MOVL AX, eax+0(FP)
	RET
