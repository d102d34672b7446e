package pp

import (
	"fmt"
	"slices"
	"strings"
)

// deadlock describes every rank that cannot move: its step, its action
// and what it waits for, with where the peer it waits on stands.
func (w *simWorld) deadlock() error {
	var lines []string
	first := -1
	for r, rs := range w.ranks {
		if rs.pc >= len(rs.s.Actions) {
			continue
		}
		if first < 0 {
			first = r
		}
		a := rs.s.Actions[rs.pc]
		var waits []string
		ops := a.Ops
		base := rs.pc
		if a.Kind == Wait {
			st := rs.async[a.Op]
			ops, base = []Op{a.Op}, st.step
		}
		for j, o := range ops {
			step, idx := base, j
			if a.Kind == Wait {
				idx = slices.Index(rs.s.Actions[step].Ops, o)
			}
			if rs.matched[[2]int{step, idx}] {
				continue
			}
			_, peer := w.route(r, o)
			waits = append(waits, fmt.Sprintf("%v %s rank %d (%s)", o, towards(o.Dir), peer, w.where(peer)))
		}
		lines = append(lines, fmt.Sprintf("rank %d at step %d (%v) waits for %s", r, rs.pc, a, strings.Join(waits, " and ")))
	}
	return &VerifyError{Kind: "deadlock", Rank: first, Step: w.ranks[first].pc, Msg: strings.Join(lines, "; ")}
}

func towards(d Dir) string {
	if d == SendNext || d == SendPrev {
		return "to"
	}
	return "from"
}

// where says where rank r stands.
func (w *simWorld) where(r int) string {
	rs := w.ranks[r]
	if rs.pc >= len(rs.s.Actions) {
		return "which has finished its list"
	}
	return fmt.Sprintf("which is at step %d: %v", rs.pc, rs.s.Actions[rs.pc])
}

func mcKeys(m map[mc]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	return sortedStrings(out)
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
