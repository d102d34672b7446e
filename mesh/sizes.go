package mesh

import (
	"errors"
	"fmt"

	"github.com/gotron/gotron/config"
)

// Sizes are the parallel sizes a Layout is built from (the arguments of Megatron's
// initialize_model_parallel). A zero TP, PP, CP, EP or NumDistOptInstances means 1,
// Megatron's default; a zero ETP means the same as TP; an empty Order means DefaultOrder.
// World, the number of ranks, is required.
type Sizes struct {
	TP                  int    // tensor-model-parallel size
	PP                  int    // pipeline-model-parallel size
	CP                  int    // context-parallel size
	EP                  int    // expert-model-parallel size
	ETP                 int    // expert-tensor-parallel size; 0 means TP
	World               int    // number of ranks
	NumDistOptInstances int    // num_distributed_optimizer_instances (partial distributed optimizer)
	Order               string // rank order, e.g. "tp-cp-ep-dp-pp"; "" means DefaultOrder
	// Placement is the pipeline placement of the model's stages: it decides
	// which ranks of each pipeline hold the first and the last stage, the
	// word-embedding group (both rank 0 of the pipeline under the V).
	Placement config.PipelinePlacement
	// EmbeddingStages, when set, are the pipeline ranks that hold the word
	// embedding or a copy of it (config.TransformerConfig.WordEmbeddingStages:
	// with multi-token prediction the depths' stage too): the word-embedding
	// group instead of the placement's ends.
	EmbeddingStages []int
}

// Dims are the resolved sizes of a Layout: the given Sizes with every default filled in,
// and the derived data-parallel sizes of the two grids.
//
//	DP  = World / (TP·PP·CP)   (dense grid tp × cp × dp × pp)
//	EDP = World / (ETP·EP·PP)  (expert grid etp × ep × edp × pp)
type Dims struct {
	Sizes
	DP  int // data-parallel size of the dense grid
	EDP int // expert data-parallel size of the expert grid
}

// resolve fills in the defaults of s, checks that the sizes tile the world and derives DP
// and EDP. It reports every violated rule at once, each with its arithmetic and a fix.
func (s Sizes) resolve() (Dims, error) {
	d := Dims{Sizes: s}
	var errs []error
	positive := func(field string, v int, zeroMeans string) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("mesh: %s = %d is negative: a parallel size is at least 1 (0 means %s)", field, v, zeroMeans))
		}
	}
	positive("TP", d.TP, "1")
	positive("PP", d.PP, "1")
	positive("CP", d.CP, "1")
	positive("EP", d.EP, "1")
	positive("ETP", d.ETP, "the same as TP")
	positive("NumDistOptInstances", d.NumDistOptInstances, "1")
	if d.World < 1 {
		errs = append(errs, fmt.Errorf("mesh: World = %d: set it to the number of ranks (at least 1)", d.World))
	}
	if len(errs) > 0 {
		return Dims{}, errors.Join(errs...)
	}
	for _, v := range []*int{&d.TP, &d.PP, &d.CP, &d.EP, &d.NumDistOptInstances} {
		if *v == 0 {
			*v = 1
		}
	}
	if d.ETP == 0 {
		d.ETP = d.TP
	}
	if d.Order == "" {
		d.Order = DefaultOrder
	}
	for i, p := range d.EmbeddingStages {
		if p < 0 || p >= d.PP || i > 0 && p <= d.EmbeddingStages[i-1] {
			return Dims{}, fmt.Errorf("mesh: EmbeddingStages %v: want ascending pipeline ranks in [0, %d)", d.EmbeddingStages, d.PP)
		}
	}

	w := d.World
	m, e := d.TP*d.PP*d.CP, d.ETP*d.EP*d.PP
	if w%m != 0 {
		errs = append(errs, fmt.Errorf("mesh: world size %d is not divisible by tp·pp·cp = %d·%d·%d = %d: use a world size that is a multiple of %d, or choose TP, PP and CP whose product divides %d",
			w, d.TP, d.PP, d.CP, m, m, w))
	} else {
		d.DP = w / m
	}
	switch {
	case w%e == 0:
		d.EDP = w / e
	case e == m:
		// The expert grid fails for the same reason as the dense one: nothing to add.
	default:
		errs = append(errs, fmt.Errorf("mesh: world size %d is not divisible by etp·ep·pp = %d·%d·%d = %d (the expert grid etp × ep × edp × pp must tile the world): use a world size that is a multiple of %d, or choose ETP, EP and PP whose product divides %d",
			w, d.ETP, d.EP, d.PP, e, e, w))
	}
	if len(errs) > 0 {
		return Dims{}, errors.Join(errs...)
	}

	n := d.NumDistOptInstances
	if dpcp := d.DP * d.CP; dpcp%n != 0 {
		errs = append(errs, fmt.Errorf("mesh: dp·cp = %d·%d = %d is not divisible by NumDistOptInstances = %d (each distributed-optimizer instance takes an equal share of the dp-cp group): choose a number of instances that divides gcd(dp·cp, edp) = gcd(%d, %d) = %d",
			d.DP, d.CP, dpcp, n, dpcp, d.EDP, gcd(dpcp, d.EDP)))
	}
	if d.EDP%n != 0 {
		errs = append(errs, fmt.Errorf("mesh: edp = world/(etp·ep·pp) = %d/(%d·%d·%d) = %d is not divisible by NumDistOptInstances = %d (each distributed-optimizer instance takes an equal share of the expt-dp group): choose a number of instances that divides gcd(dp·cp, edp) = gcd(%d, %d) = %d",
			w, d.ETP, d.EP, d.PP, d.EDP, n, d.DP*d.CP, d.EDP, gcd(d.DP*d.CP, d.EDP)))
	}
	if _, err := parseOrder(d.Order); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Dims{}, errors.Join(errs...)
	}
	return d, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
