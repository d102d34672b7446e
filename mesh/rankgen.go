package mesh

import (
	"errors"
	"fmt"
	"strings"
)

// The dimension names a RankGenerator knows, as Megatron spells them in its order strings.
// On the expert grid "tp" is the expert tensor-parallel dimension and "dp" the expert
// data-parallel one.
const (
	DimTP = "tp"
	DimCP = "cp"
	DimEP = "ep"
	DimDP = "dp"
	DimPP = "pp"
)

// DefaultOrder is Megatron's default rank order (initialize_model_parallel's order
// argument): tp varies fastest, so tensor-parallel peers are adjacent ranks.
const DefaultOrder = "tp-cp-ep-dp-pp"

// appendOrder returns the order in which Megatron's RankGenerator appends the size-1
// dimensions an order string leaves out (its name_to_size dictionary order).
func appendOrder() [5]string { return [5]string{DimTP, DimPP, DimDP, DimEP, DimCP} }

// GridCoord is a rank's position on a RankGenerator's grid: its index along each dimension.
// On the expert grid TP is the expert tensor-parallel index and DP the expert
// data-parallel index.
type GridCoord struct {
	TP, CP, EP, DP, PP int
}

func (c GridCoord) get(dim string) int {
	switch dim {
	case DimTP:
		return c.TP
	case DimCP:
		return c.CP
	case DimEP:
		return c.EP
	case DimDP:
		return c.DP
	default:
		return c.PP
	}
}

func (c *GridCoord) set(dim string, v int) {
	switch dim {
	case DimTP:
		c.TP = v
	case DimCP:
		c.CP = v
	case DimEP:
		c.EP = v
	case DimDP:
		c.DP = v
	default:
		c.PP = v
	}
}

// RankGenerator lays tp·cp·ep·dp·pp ranks on a grid whose dimensions are nested in the
// order of an order string, the first name varying fastest (Megatron's RankGenerator,
// megatron/core/parallel_state.py). For the resolved order o1-o2-…-o5 with sizes s1…s5 the
// global rank of a coordinate c is
//
//	rank = rankOffset + c1 + s1·(c2 + s2·(c3 + s3·(c4 + s4·c5)))
//
// A RankGenerator is immutable and safe for concurrent use.
type RankGenerator struct {
	size       map[string]int
	order      []string // resolved: the given names, then the omitted size-1 ones
	sizes      []int    // sizes in order
	strides    []int    // prefix products of sizes: strides[i] = s1·…·s(i)
	world      int
	rankOffset int
}

// NewRankGenerator returns the generator of a grid with the given sizes, nested in order
// (e.g. "tp-cp-ep-dp-pp"; case-insensitive). As in Megatron:
//   - ep and cp cannot both exceed 1: cp belongs to the dense grid, ep to the expert grid;
//   - a dimension of size ≠ 1 that order leaves out is an error naming it;
//   - dimensions of size 1 that order leaves out are appended after the given ones.
//
// Every size must be ≥ 1, rankOffset ≥ 0, and order may not repeat or misspell a name.
// All violations are reported together.
func NewRankGenerator(tp, ep, dp, pp, cp int, order string, rankOffset int) (*RankGenerator, error) {
	return newRankGenerator("mesh: rank generator", func(d string) string { return d }, tp, ep, dp, pp, cp, order, rankOffset)
}

// newRankGenerator is NewRankGenerator with the prefix of its error messages and the
// spelling of a dimension in them (the expert grid's tp is ETP) given by the caller.
func newRankGenerator(prefix string, label func(dim string) string, tp, ep, dp, pp, cp int, order string, rankOffset int) (*RankGenerator, error) {
	size := map[string]int{DimTP: tp, DimCP: cp, DimEP: ep, DimDP: dp, DimPP: pp}
	var errs []error
	for _, d := range appendOrder() {
		if size[d] < 1 {
			errs = append(errs, fmt.Errorf("%s: the size of %s is %d: every size must be at least 1", prefix, label(d), size[d]))
		}
	}
	if rankOffset < 0 {
		errs = append(errs, fmt.Errorf("%s: rank offset %d is negative", prefix, rankOffset))
	}
	if ep != 1 && cp != 1 {
		errs = append(errs, fmt.Errorf("%s: ep = %d and cp = %d are both > 1: one generator carries cp (the dense grid, ep = 1) or ep (the expert grid, cp = 1), never both; build the two grids separately, as Build does", prefix, ep, cp))
	}
	given, err := parseOrder(order)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	named := make(map[string]bool, len(given))
	for _, d := range given {
		named[d] = true
	}
	resolved := append([]string(nil), given...)
	for _, d := range appendOrder() {
		if named[d] {
			continue
		}
		if size[d] != 1 {
			errs = append(errs, fmt.Errorf("%s: the size of %s is %d, but the order %q does not name %s: add %s to the order (the default is %q)", prefix, label(d), size[d], order, d, d, DefaultOrder))
			continue
		}
		resolved = append(resolved, d)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	g := &RankGenerator{size: size, order: resolved, world: 1, rankOffset: rankOffset}
	for _, d := range resolved {
		g.strides = append(g.strides, g.world)
		g.sizes = append(g.sizes, size[d])
		g.world *= size[d]
	}
	return g, nil
}

// parseOrder splits an order string into dimension names, lower-cased, rejecting unknown,
// empty and repeated names. The empty string has no names.
func parseOrder(order string) ([]string, error) {
	if order == "" {
		return nil, nil
	}
	var names []string
	seen := map[string]bool{}
	for _, t := range strings.Split(strings.ToLower(order), "-") {
		switch {
		case t == "":
			return nil, fmt.Errorf("mesh: order %q has an empty name: separate the names tp, cp, ep, dp, pp with single hyphens, e.g. %q", order, DefaultOrder)
		case !isDim(t):
			return nil, fmt.Errorf("mesh: order %q names an unknown dimension %q: the names are tp, cp, ep, dp, pp, e.g. %q", order, t, DefaultOrder)
		case seen[t]:
			return nil, fmt.Errorf("mesh: order %q names %s twice: name each dimension once, e.g. %q", order, t, DefaultOrder)
		}
		seen[t] = true
		names = append(names, t)
	}
	return names, nil
}

func isDim(s string) bool {
	switch s {
	case DimTP, DimCP, DimEP, DimDP, DimPP:
		return true
	}
	return false
}

// Order returns the resolved order: the order given to NewRankGenerator (lower-cased)
// followed by the size-1 dimensions it left out.
func (g *RankGenerator) Order() string { return strings.Join(g.order, "-") }

// WorldSize returns tp·cp·ep·dp·pp, the number of ranks on the grid.
func (g *RankGenerator) WorldSize() int { return g.world }

// RankOffset returns the offset added to every rank the generator produces.
func (g *RankGenerator) RankOffset() int { return g.rankOffset }

// Size returns the size of dimension dim ("tp", "cp", "ep", "dp" or "pp"). It panics on
// any other name: that is a programming error.
func (g *RankGenerator) Size(dim string) int {
	if !isDim(dim) {
		panic(fmt.Sprintf("mesh: RankGenerator.Size: unknown dimension %q", dim))
	}
	return g.size[dim]
}

// GetRanks returns the groups of the dimensions named in token (e.g. "tp", "dp-cp",
// "tp-ep-pp"; the order of the names in token does not matter): the ranks that agree on
// every other dimension form one group (Megatron's get_ranks and
// generate_masked_orthogonal_rank_groups). There are WorldSize()/Π(sizes in token) groups
// of Π(sizes in token) ranks. Groups are listed by their index over the other dimensions
// and members by their index over the token's dimensions, in both cases the dimension
// first in the order varying fastest; with strides that are prefix products this lists
// every group and every group's members in increasing rank.
//
// GetRanks panics if token names an unknown dimension or one twice: tokens are constants
// in the calling code, so that is a programming error.
func (g *RankGenerator) GetRanks(token string) [][]int {
	mask := make([]bool, len(g.order))
	for _, t := range strings.Split(strings.ToLower(token), "-") {
		i := indexOf(g.order, t)
		if i < 0 || mask[i] {
			panic(fmt.Sprintf("mesh: RankGenerator.GetRanks(%q): unknown or repeated dimension %q (the dimensions are %s)", token, t, g.Order()))
		}
		mask[i] = true
	}
	groups := GenerateMaskedOrthogonalRankGroups(g.world, g.sizes, mask)
	if g.rankOffset != 0 {
		for _, grp := range groups {
			for i := range grp {
				grp[i] += g.rankOffset
			}
		}
	}
	return groups
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Rank returns the global rank at coordinate c:
// rankOffset + Σ c[d]·stride[d], stride[d] being the product of the sizes before d in the
// order. It panics if a coordinate is outside [0, size): that is a programming error.
func (g *RankGenerator) Rank(c GridCoord) int {
	r := g.rankOffset
	for i, d := range g.order {
		v := c.get(d)
		if v < 0 || v >= g.sizes[i] {
			panic(fmt.Sprintf("mesh: RankGenerator.Rank(%+v): %s index %d is outside [0, %d)", c, d, v, g.sizes[i]))
		}
		r += v * g.strides[i]
	}
	return r
}

// Coord returns the coordinate of a global rank, the inverse of Rank:
// c[d] = ((rank − rankOffset) / stride[d]) mod size[d]. It panics if rank is outside
// [rankOffset, rankOffset+WorldSize()): that is a programming error.
func (g *RankGenerator) Coord(rank int) GridCoord {
	local := rank - g.rankOffset
	if local < 0 || local >= g.world {
		panic(fmt.Sprintf("mesh: RankGenerator.Coord(%d): rank outside [%d, %d)", rank, g.rankOffset, g.rankOffset+g.world))
	}
	var c GridCoord
	for i, d := range g.order {
		c.set(d, local/g.strides[i]%g.sizes[i])
	}
	return c
}

// GenerateMaskedOrthogonalRankGroups returns the rank groups of the dimensions selected by
// mask on a grid of the given sizes, the first dimension varying fastest (Megatron's
// generate_masked_orthogonal_rank_groups). With stride = prefix products of sizes, group g
// and member i have the rank
//
//	Σ_{d masked} m_d·stride_d + Σ_{d unmasked} u_d·stride_d
//
// where (m_d) is i written mixed-radix over the masked sizes and (u_d) is g written
// mixed-radix over the unmasked sizes, first dimension least significant. There are
// world/Π(masked sizes) groups.
//
// It panics if len(mask) != len(sizes) or world != Π sizes: a programming error.
func GenerateMaskedOrthogonalRankGroups(world int, sizes []int, mask []bool) [][]int {
	if len(mask) != len(sizes) {
		panic(fmt.Sprintf("mesh: GenerateMaskedOrthogonalRankGroups: %d sizes but %d mask entries", len(sizes), len(mask)))
	}
	var mShape, mStride, uShape, uStride []int
	stride, prod := 1, 1
	for i, s := range sizes {
		if mask[i] {
			mShape, mStride = append(mShape, s), append(mStride, stride)
		} else {
			uShape, uStride = append(uShape, s), append(uStride, stride)
		}
		stride *= s
		if mask[i] {
			prod *= s
		}
	}
	if stride != world {
		panic(fmt.Sprintf("mesh: GenerateMaskedOrthogonalRankGroups: world %d is not the product %d of sizes %v", world, stride, sizes))
	}
	n := world / prod
	groups := make([][]int, n)
	for g := range n {
		base := mixedRadix(g, uShape, uStride)
		grp := make([]int, prod)
		for i := range prod {
			grp[i] = base + mixedRadix(i, mShape, mStride)
		}
		groups[g] = grp
	}
	return groups
}

// mixedRadix writes index in mixed radix over shape (first digit least significant) and
// returns Σ digit·stride.
func mixedRadix(index int, shape, stride []int) int {
	r := 0
	for k, s := range shape {
		r += (index % s) * stride[k]
		index /= s
	}
	return r
}
