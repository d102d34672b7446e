package mesh

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gotron/gotron/config"
)

// Layout is every rank group Megatron's initialize_model_parallel builds for one set of
// sizes, as rank lists: the dense grid tp × cp × dp × pp and the expert grid
// etp × ep × edp × pp, laid out by the same order string, and the groups derived from them.
// A Layout is immutable and safe for concurrent use; its methods return copies.
type Layout struct {
	dims   Dims
	dense  *RankGenerator
	expert *RankGenerator
	names  []string
	groups map[string][][]int
	where  map[string][]position // where[name][rank]: the rank's group and position
}

// position locates a rank in one group kind; group is -1 when no group of the kind holds it.
type position struct{ group, index int }

// Coords are a rank's coordinates on the two grids. PP is shared: Build checks that the
// pipeline groups of the two grids are identical.
type Coords struct {
	TP, CP, DP, PP int // dense grid
	EP, ETP, EDP   int // expert grid
}

// Build lays out the dense and expert grids for s and builds every group kind listed by
// GroupKinds, following Megatron's initialize_model_parallel (core_v0.19):
//
//	dense  grid: RankGenerator(tp, ep=1, dp, pp, cp, order)   dp  = World/(TP·PP·CP)
//	expert grid: RankGenerator(etp, ep, edp, pp, cp=1, order) edp = World/(ETP·EP·PP)
//
// It is an error if a size is negative or World < 1; if TP·PP·CP or ETP·EP·PP does not
// divide World; if NumDistOptInstances does not divide dp·cp and edp; if the order is
// malformed or leaves out a dimension of size ≠ 1; if the order does not end with pp while
// pp > 1 and edp ≠ dp; and if the two grids' pipeline groups differ. Every error states
// the arithmetic and a fix; independent violations are reported together.
func Build(s Sizes) (*Layout, error) {
	d, err := s.resolve()
	if err != nil {
		return nil, err
	}
	dense, errD := newRankGenerator("mesh: dense grid (tp, cp, dp, pp)", func(x string) string { return x },
		d.TP, 1, d.DP, d.PP, d.CP, d.Order, 0)
	expert, errE := newRankGenerator("mesh: expert grid (etp, ep, edp, pp)", expertLabel,
		d.ETP, d.EP, d.EDP, d.PP, 1, d.Order, 0)
	if err := errors.Join(errD, errE); err != nil {
		return nil, err
	}
	if err := checkPipelines(d, dense, expert); err != nil {
		return nil, err
	}
	l := &Layout{dims: d, dense: dense, expert: expert, groups: map[string][][]int{}}
	l.build()
	l.index()
	return l, nil
}

// expertLabel spells the expert grid's dimensions in error messages.
func expertLabel(dim string) string {
	switch dim {
	case DimTP:
		return "tp (the expert tensor-parallel size ETP)"
	case DimDP:
		return "dp (the expert data-parallel size edp)"
	}
	return dim
}

// checkPipelines applies Megatron's two rules tying the grids' pipelines together.
func checkPipelines(d Dims, dense, expert *RankGenerator) error {
	given, _ := parseOrder(d.Order) // resolve has checked it
	var errs []error
	if given[len(given)-1] != DimPP && d.PP > 1 && d.EDP != d.DP {
		errs = append(errs, fmt.Errorf("mesh: order %q does not end with pp and pp = %d > 1, so the expert data-parallel size must equal the dense one, but dp = world/(tp·pp·cp) = %d/(%d·%d·%d) = %d and edp = world/(etp·ep·pp) = %d/(%d·%d·%d) = %d: put pp last in the order (e.g. %q) or choose sizes with tp·cp = etp·ep",
			d.Order, d.PP, d.World, d.TP, d.PP, d.CP, d.DP, d.World, d.ETP, d.EP, d.PP, d.EDP, DefaultOrder))
	}
	dp, ep := dense.GetRanks(DimPP), expert.GetRanks(DimPP)
	if !slices.EqualFunc(dp, ep, slices.Equal[[]int]) {
		errs = append(errs, fmt.Errorf("mesh: the pipeline groups of the dense grid (first %v) and of the expert grid (first %v) differ: in order %q the sizes before pp multiply to %s on the dense grid but %s on the expert grid; put pp last in the order (e.g. %q) or make the two products equal",
			dp[0], ep[0], d.Order, leftOf(dense, DimPP, nil), leftOf(expert, DimPP, expertName), DefaultOrder))
	}
	return errors.Join(errs...)
}

// expertName is the expert grid's name of a dimension in arithmetic.
func expertName(dim string) string {
	switch dim {
	case DimTP:
		return "etp"
	case DimDP:
		return "edp"
	}
	return dim
}

// leftOf renders the product of the sizes before dim in g's order, e.g. "tp·cp = 2·1 = 2",
// "tp = 2", or "1 (pp is first)".
func leftOf(g *RankGenerator, dim string, name func(string) string) string {
	var names []string
	var sizes []int
	v := 1
	for i, d := range g.order {
		if d == dim {
			break
		}
		if name != nil {
			d = name(d)
		}
		names = append(names, d)
		sizes = append(sizes, g.sizes[i])
		v *= g.sizes[i]
	}
	switch len(names) {
	case 0:
		return "1 (" + dim + " is first)"
	case 1:
		return fmt.Sprintf("%s = %d", names[0], v)
	}
	return fmt.Sprintf("%s = %s = %d", strings.Join(names, "·"), product(sizes), v)
}

// build computes every group kind in the order of GroupKinds.
func (l *Layout) build() {
	d, dense, expert := l.dims, l.dense, l.expert
	add := func(name string, groups [][]int) {
		l.names = append(l.names, name)
		l.groups[name] = groups
	}
	n := d.NumDistOptInstances

	add(GroupTP, dense.GetRanks("tp"))
	add(GroupCP, dense.GetRanks("cp"))
	add(GroupDP, dense.GetRanks("dp"))
	pp := dense.GetRanks("pp")
	add(GroupPP, pp)
	dpcp := dense.GetRanks("dp-cp")
	add(GroupDPCP, dpcp)
	add(GroupTPCP, dense.GetRanks("tp-cp"))
	add(GroupTPDP, dense.GetRanks("tp-dp"))
	add(GroupTPDPCP, dense.GetRanks("tp-dp-cp"))
	add(GroupMP, dense.GetRanks("tp-pp"))
	var embd, pos [][]int
	for _, g := range pp {
		embd = append(embd, embeddingRanks(g, d.Placement, d.EmbeddingStages))
		pos = append(pos, []int{g[0]})
	}
	add(GroupEmbd, embd)
	add(GroupPosEmbd, pos)
	// Each dp-cp group is cut into n consecutive slices, one per optimizer instance.
	var intraDPCP [][]int
	for _, g := range dpcp {
		intraDPCP = append(intraDPCP, mustLevels(g, []int{len(g) / n, n})[0]...)
	}
	add(GroupIntraDPCP, intraDPCP)

	add(GroupExptTP, expert.GetRanks("tp"))
	add(GroupEP, expert.GetRanks("ep"))
	edp := expert.GetRanks("dp")
	add(GroupExptDP, edp)
	add(GroupTPEP, expert.GetRanks("tp-ep"))
	tpeppp := expert.GetRanks("tp-ep-pp")
	add(GroupTPEPPP, tpeppp)
	var intraEDP, inter [][]int
	for _, g := range edp {
		lv := mustLevels(g, []int{len(g) / n, n})
		intraEDP = append(intraEDP, lv[0]...)
		inter = append(inter, lv[1]...)
	}
	add(GroupIntraExptDP, intraEDP)
	if n > 1 {
		add(GroupInterDistOpt, inter)
	}
	// An instance is edp/n consecutive tp-ep-pp groups, concatenated.
	var intraDistOpt [][]int
	per := d.EDP / n
	for i := 0; i < len(tpeppp); i += per {
		intraDistOpt = append(intraDistOpt, slices.Concat(tpeppp[i:i+per]...))
	}
	add(GroupIntraDistOpt, intraDistOpt)
}

// mustLevels is HierarchicalGroups for sizes that resolve has already checked.
func mustLevels(ranks, sizes []int) [][][]int {
	lv, err := HierarchicalGroups(ranks, sizes)
	if err != nil {
		panic(err) // unreachable: Build checked the divisibility
	}
	return lv
}

// index records, for every kind and rank, the group holding the rank and its position.
func (l *Layout) index() {
	l.where = make(map[string][]position, len(l.names))
	for _, name := range l.names {
		w := make([]position, l.dims.World)
		for r := range w {
			w[r] = position{-1, -1}
		}
		for gi, g := range l.groups[name] {
			for i, r := range g {
				w[r] = position{gi, i}
			}
		}
		l.where[name] = w
	}
}

// Sizes returns the resolved sizes, including the derived DP and EDP.
func (l *Layout) Sizes() Dims { return l.dims }

// DenseGrid returns the generator of the dense grid (tp, cp, dp, pp; ep = 1).
func (l *Layout) DenseGrid() *RankGenerator { return l.dense }

// ExpertGrid returns the generator of the expert grid (its tp is etp, its dp is edp; cp = 1).
func (l *Layout) ExpertGrid() *RankGenerator { return l.expert }

// Names returns the group kinds the layout holds, in the order of GroupKinds.
// GroupInterDistOpt is present only when NumDistOptInstances > 1: like Megatron, a single
// instance has no inter-instance group.
func (l *Layout) Names() []string { return slices.Clone(l.names) }

// Groups returns all groups of the named kind, in Megatron's order, or nil if the layout
// has no such kind. For the kinds built by a RankGenerator token this is the token's
// GetRanks; "embd" and "pos-embd" follow the pp groups; the partial distributed-optimizer
// kinds follow the dp-cp, expt-dp and tp-ep-pp groups they are cut from.
func (l *Layout) Groups(name string) [][]int {
	g, ok := l.groups[name]
	if !ok {
		return nil
	}
	out := make([][]int, len(g))
	for i := range g {
		out[i] = slices.Clone(g[i])
	}
	return out
}

// GroupOf returns the group of the named kind that holds rank, and rank's position in it
// (its rank within the group, e.g. its dp rank for "dp"). It returns nil, -1 if the kind
// is unknown, rank is outside [0, World), or no group of the kind holds rank (a middle
// pipeline stage has no "embd" group).
func (l *Layout) GroupOf(name string, rank int) (members []int, index int) {
	w, ok := l.where[name]
	if !ok || rank < 0 || rank >= len(w) || w[rank].group < 0 {
		return nil, -1
	}
	p := w[rank]
	return slices.Clone(l.groups[name][p.group]), p.index
}

func (l *Layout) checkRank(rank int) error {
	if rank < 0 || rank >= l.dims.World {
		return fmt.Errorf("mesh: rank %d is outside the world [0, %d)", rank, l.dims.World)
	}
	return nil
}

// Coords returns rank's coordinates on the dense and expert grids.
func (l *Layout) Coords(rank int) (Coords, error) {
	if err := l.checkRank(rank); err != nil {
		return Coords{}, err
	}
	dc, ec := l.dense.Coord(rank), l.expert.Coord(rank)
	return Coords{TP: dc.TP, CP: dc.CP, DP: dc.DP, PP: dc.PP, EP: ec.EP, ETP: ec.TP, EDP: ec.DP}, nil
}

// PipelineNextRank returns the rank after rank in its pp group, wrapping modulo pp, so the
// last stage's next is the first stage (Megatron's get_pipeline_model_parallel_next_rank).
func (l *Layout) PipelineNextRank(rank int) (int, error) { return l.pipelineStep(rank, 1) }

// PipelinePrevRank returns the rank before rank in its pp group, wrapping modulo pp, so the
// first stage's previous is the last stage (Megatron's get_pipeline_model_parallel_prev_rank).
func (l *Layout) PipelinePrevRank(rank int) (int, error) { return l.pipelineStep(rank, -1) }

func (l *Layout) pipelineStep(rank, step int) (int, error) {
	if err := l.checkRank(rank); err != nil {
		return 0, err
	}
	p := l.where[GroupPP][rank]
	g := l.groups[GroupPP][p.group]
	return g[(p.index+step+len(g))%len(g)], nil
}

// embeddingRanks returns the ranks of pipeline g holding the first and
// the last stage of the model under placement pl (each once): Megatron's
// get_embedding_ranks, g[0] and g[P−1] under the loop placement, g[0]
// alone under the V; or, given stages, g's ranks at those pipeline ranks.
func embeddingRanks(g []int, pl config.PipelinePlacement, stages []int) []int {
	if stages != nil {
		out := make([]int, len(stages))
		for i, p := range stages {
			out[i] = g[p]
		}
		return out
	}
	first, last := pl.Ends(len(g))
	if first == last {
		return []int{g[first]}
	}
	return []int{g[first], g[last]}
}
