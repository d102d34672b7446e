package mesh

import (
	"fmt"
	"strings"
)

// HierarchicalGroups splits one group into levels of sub-groups (Megatron's
// create_hierarchical_groups, used for the partial distributed-optimizer groups and for
// hierarchical context parallelism). The group's members are read as a grid of
// sizes[0] × sizes[1] × … with sizes[0] varying fastest; level k holds the sub-groups along
// dimension k. With u = Π sizes[:k], s = sizes[k] and l = Π sizes[k+1:], member j of
// sub-group (a, b) (a < l outer, b < u inner) of level k is
//
//	ranks[a·s·u + j·u + b],  j = 0 … s−1
//
// so the result has len(sizes) levels, level k holding len(ranks)/sizes[k] sub-groups of
// sizes[k] ranks. For 16 ranks and sizes [2, 2, 4], level 0 is [0 1] [2 3] …, level 1 is
// [0 2] [1 3] [4 6] …, and level 2 is [0 4 8 12] [1 5 9 13] ….
//
// It is an error if a size is < 1 or if Π sizes ≠ len(ranks).
func HierarchicalGroups(ranks []int, sizes []int) ([][][]int, error) {
	prod := 1
	for _, s := range sizes {
		if s < 1 {
			return nil, fmt.Errorf("mesh: hierarchical group sizes %v: every size must be at least 1", sizes)
		}
		prod *= s
	}
	if prod != len(ranks) {
		return nil, fmt.Errorf("mesh: hierarchical group sizes %v multiply to %s = %d, but the group has %d ranks: choose sizes whose product is %d", sizes, product(sizes), prod, len(ranks), len(ranks))
	}
	levels := make([][][]int, len(sizes))
	u := 1
	for k, s := range sizes {
		l := prod / (u * s)
		var level [][]int
		for a := range l {
			for b := range u {
				sub := make([]int, s)
				for j := range s {
					sub[j] = ranks[a*s*u+j*u+b]
				}
				level = append(level, sub)
			}
		}
		levels[k] = level
		u *= s
	}
	return levels, nil
}

// product renders the factors of a product, "2·2·4".
func product(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, "·")
}
