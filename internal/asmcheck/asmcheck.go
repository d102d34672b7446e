// Package asmcheck inspects the machine code of gotron's own SIMD kernels
// for instruction mixes the Go compiler can produce but a CPU punishes.
//
// The one check, [LegacySSEWhileDirty], finds legacy-SSE (non-VEX)
// instructions that write an XMM register while the upper halves of the
// vector registers are dirty: after an AVX or AVX-512 instruction on a YMM
// or ZMM register, with no VZEROUPPER between. Go's compiler emits such
// instructions for scalar code (a MOVQ of a shift count, a MOVUPS copy of a
// struct, the scalar additions of a horizontal sum, a reloaded float
// argument). On AMD Zen they cost nothing; on an Intel Xeon each one waits
// for a merge with the dirty upper halves: kernels.F32ToBF16 ran at 0.7
// GB/s instead of 26 on an Intel Xeon with AMX (2026-11-28) for one MOVQ
// in its loop, and a softmax row paid for a 14-vector struct copy on every
// call.
//
// The check follows each function's control flow (branches, fall-through,
// not runtime panics nor the stack-growth retry) and the calls between the
// checked functions: a function is entered dirty when any call site
// reaches it dirty, and a call leaves the state the callee exits with.
// Calls into other code (the runtime's memmove, say) are taken to leave
// the state as it was: what they run is not checked. Functions in
// _test.go files are left out. It reads the disassembly of GNU objdump
// (binutils), the only disassembler on the machine that decodes EVEX
// (AVX-512).
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

// LegacySSEWhileDirty disassembles the functions of binary whose names
// start with prefix and returns every legacy-SSE instruction writing an
// XMM register that some path from the function's entry reaches with the
// vector registers' upper halves dirty. Functions are found in Go's own
// symbol table (.gopclntab), which a test binary keeps when its ELF
// symbols are stripped. It needs objdump on the PATH ([exec.ErrNotFound]
// otherwise).
func LegacySSEWhileDirty(binary, prefix string) ([]Finding, error) {
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
	return scanAll(fs), nil
}

// scanAll scans every function, across the calls between them: a
// function is entered dirty if any of its call sites is reached dirty, and
// a call to it leaves the state it exits with (the runtime's and other
// unchecked functions leave the caller's state as it was). It iterates
// until no entry or exit state changes.
func scanAll(fs []function) []Finding {
	byEntry := make(map[uint64]int, len(fs))
	for i, f := range fs {
		byEntry[f.entry] = i
	}
	entry, exit := make([]bool, len(fs)), make([]bool, len(fs))
	var found []Finding
	for changed := true; changed; {
		changed, found = false, nil
		for i := range fs {
			r := fs[i].scan(entry[i], func(target uint64, dirty bool) (bool, bool) {
				j, ok := byEntry[target]
				if !ok {
					return dirty, false
				}
				if dirty && !entry[j] {
					entry[j], changed = true, true
				}
				return exit[j], true
			})
			if r.exitDirty && !exit[i] {
				exit[i], changed = true, true
			}
			found = append(found, r.found...)
		}
	}
	return found
}

// scanResult is what scan finds in one function.
type scanResult struct {
	found     []Finding
	exitDirty bool // a return is reached with dirty upper halves
}

// noReturn lists the runtime functions a call never returns from: the
// panics of bounds and nil checks and the fatal errors. The blocks after
// such a call are reached only by their own branches.
var noReturn = []string{"runtime.panic", "runtime.goPanic", "runtime.throw", "runtime.fatal"}

// noReturnCalls returns the addresses of table's functions in noReturn.
func noReturnCalls(table *gosym.Table) map[uint64]bool {
	m := map[uint64]bool{}
	for _, fn := range table.Funcs {
		for _, p := range noReturn {
			if strings.HasPrefix(fn.Name, p) {
				m[fn.Entry] = true
			}
		}
	}
	return m
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
	dead := noReturnCalls(table)
	for _, fn := range table.Funcs {
		if !strings.HasPrefix(fn.Name, prefix) {
			continue
		}
		if file, _, _ := table.PCToLine(fn.Entry); strings.HasSuffix(file, "_test.go") {
			continue // a test's own code (it may call a vector helper and go on dirty) is not checked
		}
		fs = append(fs, function{name: fn.Name, entry: fn.Entry, end: fn.End, noReturn: dead})
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
	noReturn   map[uint64]bool // the functions a call does not return from
}

var (
	instLine = regexp.MustCompile(`^\s+([0-9a-f]+):\s+(.+)$`)
	// target64 matches a direct branch or call and its target: "jae 401006
	// <f+0x6>", or in a stripped binary "jae 0x401006".
	target64 = regexp.MustCompile(`^(?:j\w+|call)\s+(?:0x)?([0-9a-f]+)\b`)
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
		text, _, _ := strings.Cut(m[2], "#") // objdump's "# 652d4c <$f32.80000000>" after RIP-relative operands
		ins = append(ins, inst{a, strings.Join(strings.Fields(text), " ")})
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

// scan returns the function's legacy-SSE writes of an XMM register that
// execute, on some path from the entry (entered dirty or clean), while
// the upper halves are dirty: a forward data flow over the instructions,
// each either clean or dirty on entry (dirty if any predecessor leaves it
// dirty). call tells, for a direct call's target and the state at the
// call, the state after it and whether the target is a checked function.
func (f function) scan(entryDirty bool, call func(target uint64, dirty bool) (after, known bool)) scanResult {
	index := make(map[uint64]int, len(f.insts))
	for i, in := range f.insts {
		index[in.addr] = i
	}
	reached, dirty := make([]bool, len(f.insts)), make([]bool, len(f.insts))
	var work []int
	visit := func(i int, d bool) {
		if i < 0 || i >= len(f.insts) || reached[i] && (dirty[i] || !d) {
			return
		}
		reached[i], dirty[i] = true, dirty[i] || d
		work = append(work, i)
	}
	visit(0, entryDirty)
	var r scanResult
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		text := f.insts[i].text
		out := after(text, dirty[i])
		if t, ok := callTarget(text); ok && call != nil {
			out, _ = call(t, dirty[i])
		}
		if strings.HasPrefix(text, "ret") && dirty[i] {
			r.exitDirty = true
		}
		for _, s := range f.successors(i, index) {
			visit(s, out)
		}
	}
	for i, in := range f.insts {
		if dirty[i] && legacySSEWrite(in.text) {
			r.found = append(r.found, Finding{f.name, in.addr, in.text})
		}
	}
	return r
}

// callTarget returns a direct call's target address.
func callTarget(text string) (uint64, bool) {
	if !strings.HasPrefix(text, "call") {
		return 0, false
	}
	m := target64.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	t, err := strconv.ParseUint(m[1], 16, 64)
	return t, err == nil
}

// after returns whether the upper halves are dirty after an instruction
// that found them dirty (or not).
func after(text string, dirty bool) bool {
	switch {
	case strings.HasPrefix(text, "vzeroupper"), strings.HasPrefix(text, "vzeroall"):
		return false
	case strings.HasPrefix(text, "v") && (strings.Contains(text, "%ymm") || strings.Contains(text, "%zmm")):
		return true
	}
	return dirty
}

// successors returns the indexes of the instructions that may follow
// instruction i: the branch target within the function and, unless the
// instruction is an unconditional jump, a return or a call that does not
// return, the next one. An indirect jump's targets are unknown and not
// followed, nor is a jump back to the entry: Go's retry after growing the
// stack (runtime.morestack), which starts the function afresh.
func (f function) successors(i int, index map[uint64]int) []int {
	text := f.insts[i].text
	switch {
	case strings.HasPrefix(text, "ret"), strings.HasPrefix(text, "ud2"), strings.HasPrefix(text, "int3"):
		return nil
	case strings.HasPrefix(text, "jmp") && strings.Contains(text, "*"):
		return nil
	}
	target, direct := uint64(0), false
	if m := target64.FindStringSubmatch(text); m != nil {
		t, err := strconv.ParseUint(m[1], 16, 64)
		target, direct = t, err == nil
	}
	if strings.HasPrefix(text, "call") {
		if direct && f.noReturn[target] {
			return nil
		}
		return []int{i + 1}
	}
	var next []int
	if !strings.HasPrefix(text, "jmp") {
		next = append(next, i+1)
	}
	if j, ok := index[target]; direct && ok && target != f.entry && strings.HasPrefix(text, "j") {
		next = append(next, j)
	}
	return next
}

// legacySSEWrite reports whether an instruction is a non-VEX one that
// writes an XMM register (VEX and EVEX mnemonics start with v).
func legacySSEWrite(text string) bool {
	return !strings.HasPrefix(text, "v") && writesXMM.MatchString(text)
}
