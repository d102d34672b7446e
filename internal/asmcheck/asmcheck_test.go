package asmcheck

import (
	"slices"
	"testing"
)

// dump is objdump output of five functions, from a symbol-bearing binary
// (branch targets "401006 <f+0x6>") and a stripped one ("0x401052").
const dump = `
0000000000401000 <pkg.kernel>:
  401000:	mov    $0x10,%r9d
  401006:	vmovdqu64 (%r9),%zmm5
  40100c:	movq   %r9,%xmm7
  401011:	vpsrld %xmm7,%zmm5,%zmm8
  401017:	movups %xmm15,(%r10)
  40101b:	cmp    %rbx,%rcx
  40101e:	jae    401006 <pkg.kernel+0x6>
  401020:	xorps  %xmm0,%xmm0
  401023:	ret
  401024:	call   0x400000
  401029:	jmp    401000 <pkg.kernel>
0000000000401030 <pkg.scalar>:
  401030:	movss  (%r11,%rsi,4),%xmm1
  401036:	addss  %xmm1,%xmm0
  40103a:	jne    401030 <pkg.scalar>
0000000000401040 <pkg.cleared>:
  401040:	vaddps %zmm1,%zmm2,%zmm3
  401046:	vzeroupper
  401049:	cvtss2sd %xmm1,%xmm1
  40104d:	jne    0x401040
0000000000401050 <.text+0x50>:
  401050:	test   %rax,%rax
  401053:	je     0x40105f
  401055:	vaddps %zmm1,%zmm2,%zmm3
  40105b:	vzeroupper
  40105e:	ret
  40105f:	xorps  %xmm0,%xmm0
  401062:	ret
0000000000401070 <.text+0x70>:
  401070:	movss  %xmm0,0x10(%rsp)
  401076:	vbroadcastss %xmm0,%zmm0
  40107c:	vmovups %zmm0,(%rax)
  401082:	movsd  0x10(%rsp),%xmm2
  401088:	vzeroupper
  40108b:	addsd  %xmm2,%xmm3
  40108f:	vaddps %xmm1,%xmm2,%xmm3
  401093:	cvtss2sd %xmm1,%xmm1
  401097:	ret
`

// TestScanFollowsTheControlFlow: the loop's MOVQ (dirty by the loop's back
// edge) and the XORPS after the loop are reported; a store (no register
// written), a scalar loop, code after VZEROUPPER, an early return laid out
// after the vector code (reached only clean), scalar code before the
// first vector instruction and after an XMM-only VEX one are not, and
// neither is code no path reaches (the morestack retry after a return).
func TestScanFollowsTheControlFlow(t *testing.T) {
	fs := []function{
		{name: "pkg.kernel", entry: 0x401000, end: 0x401030},
		{name: "pkg.scalar", entry: 0x401030, end: 0x401040},
		{name: "pkg.cleared", entry: 0x401040, end: 0x401050},
		{name: "pkg.early", entry: 0x401050, end: 0x401070},
		{name: "pkg.reduce", entry: 0x401070, end: 0x4010a0},
	}
	var got []string
	for _, f := range parsed(fs, dump) {
		got = append(got, names(f.scan(false, nil).found)...)
	}
	want := []string{
		"pkg.kernel at 0x40100c: movq %r9,%xmm7",
		"pkg.kernel at 0x401020: xorps %xmm0,%xmm0",
		"pkg.reduce at 0x401082: movsd 0x10(%rsp),%xmm2",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("findings\n%q\nwant\n%q", got, want)
	}
}

func TestLegacySSEWrite(t *testing.T) {
	for text, want := range map[string]bool{
		"movq %r9,%xmm7":               true,
		"xorps %xmm2,%xmm2":            true,
		"movups (%rcx),%xmm14":         true,
		"movups %xmm15,(%r10)":         false, // a store writes no register
		"vmovq %r9,%xmm7":              false, // VEX
		"vpsrld %xmm7,%zmm5,%zmm8":     false,
		"cvtsi2ss %rax,%xmm0":          true,
		"movss %xmm0,0x20(%rsp)":       false,
		"vbroadcastss %xmm0,%zmm1":     false,
		"pinsrd $0x1,%eax,%xmm3":       true,
		"vpcmpud $0xe,%zmm3,%zmm8,%k1": false,
	} {
		if got := legacySSEWrite(text); got != want {
			t.Errorf("legacySSEWrite(%q) = %v, want %v", text, got, want)
		}
	}
}

// TestScanAllFollowsCalls: a scalar helper called while dirty is entered
// dirty (its MOVSS reported), a constant load with objdump's comment is a
// write, and after a call to a helper that returns clean the caller is
// clean.
func TestScanAllFollowsCalls(t *testing.T) {
	const code = `
  403000:	vaddps %zmm1,%zmm2,%zmm3
  403006:	call   0x403040
  40300b:	movss  0xc2ce4(%rip),%xmm1        # 4c5cf4 <$f32.80000000>
  403013:	call   0x403060
  403018:	cvtss2sd %xmm1,%xmm1
  40301c:	ret
  403040:	movss  0xc2ce4(%rip),%xmm0        # 4c5d2c <$f32.3f800000>
  403048:	mulss  %xmm0,%xmm1
  40304c:	ret
  403060:	vzeroupper
  403063:	ret
`
	fs := []function{
		{name: "pkg.kernel", entry: 0x403000, end: 0x403040},
		{name: "pkg.scalarTail", entry: 0x403040, end: 0x403060},
		{name: "pkg.clean", entry: 0x403060, end: 0x403070},
	}
	got := names(scanAll(parsed(fs, code)))
	want := []string{
		"pkg.kernel at 0x40300b: movss 0xc2ce4(%rip),%xmm1",
		"pkg.scalarTail at 0x403040: movss 0xc2ce4(%rip),%xmm0",
		"pkg.scalarTail at 0x403048: mulss %xmm0,%xmm1",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("findings\n%q\nwant\n%q", got, want)
	}
}

// parsed gives fs the instructions of objdump output text.
func parsed(fs []function, text string) []function {
	assign(fs, parse([]byte(text)))
	return fs
}

// names returns the findings as strings.
func names(found []Finding) []string {
	var out []string
	for _, x := range found {
		out = append(out, x.String())
	}
	return out
}
