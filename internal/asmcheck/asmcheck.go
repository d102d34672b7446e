// Package asmcheck inspects the machine code of gotron's own SIMD kernels
// for instruction mixes the Go compiler can produce but a CPU punishes.
//
// The one check today, [LegacySSEInVectorLoops], finds legacy-SSE
// (non-VEX) instructions that write an XMM register inside a loop that
// also runs AVX or AVX-512 instructions. Go's compiler emits such
// instructions for some scalar constants and copies (a MOVQ of a shift
// count, a MOVUPS of a struct, an XORPS to zero a float). On AMD Zen they
// cost nothing; on Intel Xeons an SSE instruction that writes a register
// while the upper halves of the vector registers are dirty waits for a
// merge with them, and in a tight loop that can be most of its time:
// kernels.F32ToBF16 ran at 0.7 GB/s instead of 26 on an Intel Xeon with
// AMX (2026-11-28) for one MOVQ in its loop. A loop that executes
// VZEROUPPER has no dirty upper state when its scalar code runs and is not
// reported.
//
// The check reads the disassembly of GNU objdump (binutils), the only
// disassembler on the machine that decodes EVEX (AVX-512) encodings.
package asmcheck

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"debug/gosym"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Finding is one legacy-SSE instruction inside a vector loop.
type Finding struct {
	Func string // the function's symbol
	Addr uint64 // the instruction's address
	Inst string // the instruction as objdump prints it
}

func (f Finding) String() string {
	return fmt.Sprintf("%s at %#x: %s", f.Func, f.Addr, f.Inst)
}

// LegacySSEInVectorLoops disassembles the functions of binary whose
// names start with prefix and returns every legacy-SSE instruction writing
// an XMM register inside a loop (the range of a backward branch) that also
// holds a YMM or ZMM instruction and no VZEROUPPER. Functions are found in
// Go's own symbol table (.gopclntab), which a test binary keeps when its
// ELF symbols are stripped. It needs objdump on the PATH
// ([exec.ErrNotFound] otherwise).
func LegacySSEInVectorLoops(binary, prefix string) ([]Finding, error) {
	fs, err := functions(binary, prefix)
	if err != nil {
		return nil, err
	}
	lo, hi := fs[0].entry, fs[len(fs)-1].end
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn",
		"--start-address="+strconv.FormatUint(lo, 10), "--stop-address="+strconv.FormatUint(hi, 10), binary).Output()
	if err != nil {
		return nil, fmt.Errorf("objdump %s: %w", binary, err)
	}
	assign(fs, parse(out))
	var found []Finding
	for _, f := range fs {
		found = append(found, f.scan()...)
	}
	return found, nil
}

// functions returns the functions of binary whose names start with
// prefix, in address order, from its Go symbol table.
func functions(binary, prefix string) ([]function, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	text, pcln := f.Section(".text"), f.Section(".gopclntab")
	if text == nil || pcln == nil {
		return nil, fmt.Errorf("%s has no .text or .gopclntab section: not a Go binary", binary)
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", binary, err)
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", binary, err)
	}
	var fs []function
	for _, fn := range table.Funcs {
		if strings.HasPrefix(fn.Name, prefix) {
			fs = append(fs, function{name: fn.Name, entry: fn.Entry, end: fn.End})
		}
	}
	if len(fs) == 0 {
		return nil, fmt.Errorf("%s has no function named %s…", binary, prefix)
	}
	slices.SortFunc(fs, func(a, b function) int { return cmp.Compare(a.entry, b.entry) })
	return fs, nil
}

type inst struct {
	addr uint64
	text string
}

type function struct {
	name       string
	entry, end uint64
	insts      []inst
}

var (
	instLine = regexp.MustCompile(`^\s+([0-9a-f]+):\s+(.+)$`)
	branch   = regexp.MustCompile(`^j\w+\s+(?:0x)?([0-9a-f]+)\b`) // "jae 401006 <f+0x6>" or, stripped, "jae 0x401006"
	// writesXMM matches an instruction whose destination (AT&T: the last
	// operand) is an XMM register.
	writesXMM = regexp.MustCompile(`,%xmm\d+$`)
)

// parse returns the instructions of objdump's output in address order.
func parse(out []byte) []inst {
	var ins []inst
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := instLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		a, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			continue
		}
		ins = append(ins, inst{a, strings.Join(strings.Fields(m[2]), " ")})
	}
	return ins
}

// assign gives each function (sorted by entry) the instructions in
// [entry, end).
func assign(fs []function, ins []inst) {
	j := 0
	for i := range fs {
		for j < len(ins) && ins[j].addr < fs[i].entry {
			j++
		}
		for j < len(ins) && ins[j].addr < fs[i].end {
			fs[i].insts = append(fs[i].insts, ins[j])
			j++
		}
	}
}

// scan returns the function's legacy-SSE writes inside vector loops.
func (f function) scan() []Finding {
	seen := map[uint64]bool{}
	var found []Finding
	for i, in := range f.insts {
		m := branch.FindStringSubmatch(in.text)
		if m == nil {
			continue
		}
		target, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil || target >= in.addr || target == f.entry {
			continue // not a loop; a jump to the entry retries after runtime.morestack
		}
		body := f.loop(target, i)
		if !vectorLoop(body) {
			continue
		}
		for _, b := range body {
			if legacySSEWrite(b.text) && !seen[b.addr] {
				seen[b.addr] = true
				found = append(found, Finding{f.name, b.addr, b.text})
			}
		}
	}
	return found
}

// loop returns the instructions from address target up to the branch at
// index end.
func (f function) loop(target uint64, end int) []inst {
	start := end
	for start > 0 && f.insts[start-1].addr >= target {
		start--
	}
	return f.insts[start : end+1]
}

// vectorLoop reports whether a loop body runs YMM or ZMM instructions and
// never clears the upper halves.
func vectorLoop(body []inst) bool {
	vector := false
	for _, b := range body {
		if strings.HasPrefix(b.text, "vzeroupper") || strings.HasPrefix(b.text, "vzeroall") {
			return false
		}
		vector = vector || strings.Contains(b.text, "%ymm") || strings.Contains(b.text, "%zmm")
	}
	return vector
}

// legacySSEWrite reports whether an instruction is a non-VEX one that
// writes an XMM register (VEX and EVEX mnemonics start with v).
func legacySSEWrite(text string) bool {
	return !strings.HasPrefix(text, "v") && writesXMM.MatchString(text)
}
