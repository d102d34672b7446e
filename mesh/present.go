package mesh

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable writes a readable description of the layout to w: the sizes of the two grids,
// then one line per group kind (name, grid, Megatron's name, group size, number of groups,
// the groups). For example, for World 4, TP 2:
//
//	world size 4, order tp-cp-ep-dp-pp
//	dense grid   tp 2 × cp 1 × dp 2 × pp 1
//	expert grid  etp 2 × ep 1 × edp 2 × pp 1
//	distributed-optimizer instances 1
//
//	kind  grid   megatron  size  count  groups
//	tp    dense  tp        2     2      [0 1] [2 3]
//	…
func (l *Layout) WriteTable(w io.Writer) error {
	d := l.dims
	var b bytes.Buffer
	fmt.Fprintf(&b, "world size %d, order %s\n", d.World, d.Order)
	fmt.Fprintf(&b, "dense grid   tp %d × cp %d × dp %d × pp %d\n", d.TP, d.CP, d.DP, d.PP)
	fmt.Fprintf(&b, "expert grid  etp %d × ep %d × edp %d × pp %d\n", d.ETP, d.EP, d.EDP, d.PP)
	fmt.Fprintf(&b, "distributed-optimizer instances %d\n\n", d.NumDistOptInstances)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tgrid\tmegatron\tsize\tcount\tgroups")
	for _, k := range GroupKinds() {
		groups, ok := l.groups[k.Name]
		if !ok {
			continue
		}
		parts := make([]string, len(groups))
		for i, g := range groups {
			parts[i] = fmt.Sprint(g)
		}
		// Every group of a kind has the same size.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", k.Name, k.Grid, k.Megatron, len(groups[0]), len(groups), strings.Join(parts, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteJSON writes the layout to w as JSON, one group kind per line:
//
//	{
//	  "world_size": 16,
//	  "order": "tp-cp-ep-dp-pp",
//	  "sizes": {"tp": 2, "cp": 1, "dp": 4, "pp": 2, "ep": 1, "etp": 2, "edp": 8, "num_distributed_optimizer_instances": 1},
//	  "groups": {
//	    "tp": [[0,1],[2,3],…],
//	    …
//	  }
//	}
//
// The keys of "groups" are the names of Layout.Names, in that order, and each value is
// Layout.Groups of that name.
func (l *Layout) WriteJSON(w io.Writer) error {
	_, err := w.Write(l.jsonBytes())
	return err
}

// MarshalJSON returns the document WriteJSON writes: an object with the keys
// "world_size", "order", "sizes" and "groups" (Megatron's group names mapped to their
// rank lists, in Megatron's order).
func (l *Layout) MarshalJSON() ([]byte, error) { return l.jsonBytes(), nil }

func (l *Layout) jsonBytes() []byte {
	d := l.dims
	var b bytes.Buffer
	b.WriteString("{\n")
	fmt.Fprintf(&b, "  \"world_size\": %d,\n", d.World)
	order, _ := json.Marshal(d.Order) // a string always marshals
	fmt.Fprintf(&b, "  \"order\": %s,\n", order)
	fmt.Fprintf(&b, "  \"sizes\": {\"tp\": %d, \"cp\": %d, \"dp\": %d, \"pp\": %d, \"ep\": %d, \"etp\": %d, \"edp\": %d, \"num_distributed_optimizer_instances\": %d},\n",
		d.TP, d.CP, d.DP, d.PP, d.EP, d.ETP, d.EDP, d.NumDistOptInstances)
	b.WriteString("  \"groups\": {\n")
	for i, name := range l.names {
		fmt.Fprintf(&b, "    %q: [", name)
		for j, g := range l.groups[name] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			for k, r := range g {
				if k > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.Itoa(r))
			}
			b.WriteByte(']')
		}
		b.WriteByte(']')
		if i < len(l.names)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  }\n}\n")
	return b.Bytes()
}
