package pp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gotron/gotron/config"
)

// FormatGrid draws the ranks' schedules as a grid, one row per rank and
// one column per action index, for `gotron inspect schedule`:
//
//	F3.1 B0.0  forward of microbatch 3 on chunk 1, backward of 0 on chunk 0
//	           (without chunks: F3, B0)
//	[sn3 rn0]  a blocking Comm: send_next, recv_prev, send_prev, recv_next
//	{sn3 rp4}  an async Comm (overlap_p2p_comm)
//	w:rp4      a Wait for that op
//	nosync sync gs1 ps1  no_sync entered, left, grad_sync / param_sync of chunk 1
//
// Columns are aligned across ranks by action index, not by time.
func FormatGrid(schedules []*Schedule) string {
	if len(schedules) == 0 {
		return ""
	}
	s0 := schedules[0]
	chunks := s0.VPP > 1
	var b strings.Builder
	fmt.Fprintf(&b, "%s: pp %d, vpp %d, %d microbatches, group size %d", s0.Name, s0.PP, s0.VPP, s0.Microbatches, s0.GroupSize)
	if s0.ForwardOnly {
		b.WriteString(", forward only")
	}
	b.WriteString("\n")

	cells := make([][]string, len(schedules))
	labels := make([]string, len(schedules))
	width := []int{}
	labelWidth := 0
	for r, s := range schedules {
		labels[r] = fmt.Sprintf("rank %d (W %d, R %d)", s.Rank, s.Warmup, s.Remaining)
		labelWidth = max(labelWidth, len(labels[r]))
		for i, a := range s.Actions {
			c := gridCell(a, chunks)
			cells[r] = append(cells[r], c)
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	for r := range schedules {
		fmt.Fprintf(&b, "%-*s |", labelWidth, labels[r])
		for i, c := range cells[r] {
			fmt.Fprintf(&b, " %-*s", width[i], c)
		}
		b.WriteString("\n")
	}
	compute := "F/B m.c compute"
	if len(schedules) > 0 && schedules[0].SplitBackward {
		compute += ", W m.c a split backward's weight gradients"
	}
	if n := len(schedules); n > 0 && schedules[n-1].DeferredEmbeddingWgrads > 0 {
		compute += ", Ec the deferred output-layer weight gradients of chunk c"
	}
	b.WriteString("legend: " + compute + "; [ ] blocking and { } async comm of sn send_next, rp recv_prev, sp send_prev, rn recv_next; w: wait; nosync/sync enter/leave no_sync; gs/ps grad/param sync of a chunk\n")
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// cell formats one action compactly.
func gridCell(a Action, chunks bool) string {
	mcs := func(m, c int) string {
		if chunks {
			return fmt.Sprintf("%d.%d", m, c)
		}
		return fmt.Sprint(m)
	}
	opStr := func(o Op) string {
		return [...]string{"sp", "rp", "sn", "rn"}[o.Dir&3] + mcs(o.Microbatch, o.Chunk)
	}
	switch a.Kind {
	case Forward, Backward, WeightGrad:
		return a.Kind.String() + mcs(a.Microbatch, a.Chunk)
	case Comm:
		parts := make([]string, len(a.Ops))
		for i, o := range a.Ops {
			parts[i] = opStr(o)
		}
		if a.Async {
			return "{" + strings.Join(parts, " ") + "}"
		}
		return "[" + strings.Join(parts, " ") + "]"
	case Wait:
		return "w:" + opStr(a.Op)
	case DisableGradSync:
		return "nosync"
	case EnableGradSync:
		return "sync"
	case GradSync:
		return fmt.Sprintf("gs%d", a.Chunk)
	case ParamSync:
		return fmt.Sprintf("ps%d", a.Chunk)
	case EmbeddingWgrad:
		return fmt.Sprintf("E%d", a.Chunk)
	}
	return a.String()
}

// ScheduleDoc is the JSON form of a pipeline's schedules:
//
//	{"pp":P,"vpp":V,"microbatches":M,"group_size":G,
//	 "ranks":[{"rank":r,"warmup":W,"remaining":R,"order":[…]}]}
//
// where order is the rank's signed compute order (Schedule.Order: +c+1 a
// forward of chunk c, −(c+1) a backward; for training runs it equals
// ConvertScheduleTableToOrder of the table and W).
type ScheduleDoc struct {
	PP           int `json:"pp"`
	VPP          int `json:"vpp"`
	Microbatches int `json:"microbatches"`
	GroupSize    int `json:"group_size"`
	// Placement is "v" when chunk c of rank r holds stage r (c = 0) or
	// 2P−1−r (c = 1) (ZB-V, DualPipeV); absent for the reference's loop.
	Placement string    `json:"placement,omitempty"`
	Ranks     []RankDoc `json:"ranks"`
}

// RankDoc is one rank's entry of a ScheduleDoc.
type RankDoc struct {
	Rank      int   `json:"rank"`
	Warmup    int   `json:"warmup"`
	Remaining int   `json:"remaining"`
	Order     []int `json:"order"`
}

// Doc returns the ScheduleDoc of the ranks' schedules.
func Doc(schedules []*Schedule) ScheduleDoc {
	d := ScheduleDoc{Ranks: []RankDoc{}}
	for i, s := range schedules {
		if i == 0 {
			d.PP, d.VPP, d.Microbatches, d.GroupSize = s.PP, s.VPP, s.Microbatches, s.GroupSize
			if s.Placement != config.PlacementLoop {
				d.Placement = s.Placement.String()
			}
		}
		order := append([]int{}, s.Order...)
		d.Ranks = append(d.Ranks, RankDoc{Rank: s.Rank, Warmup: s.Warmup, Remaining: s.Remaining, Order: order})
	}
	return d
}

// FormatJSON returns Doc(schedules) as one line of JSON.
func FormatJSON(schedules []*Schedule) ([]byte, error) {
	return json.Marshal(Doc(schedules))
}
