// Package mesh computes which ranks form each parallel group: the pure, communication-free
// part of Megatron-Core's parallel_state (megatron/core/parallel_state.py, core_v0.19).
// Turning the rank lists into communicator groups is the job of the code that owns the
// communicators.
//
// # Rank generator
//
// A RankGenerator places tp·cp·ep·dp·pp ranks on a grid whose dimensions nest in the order
// of an order string, the first name varying fastest. Under the default order
// "tp-cp-ep-dp-pp",
//
//	rank = tp + TP·(cp + CP·(ep + EP·(dp + DP·pp)))
//
// so tensor-parallel peers are adjacent ranks. GetRanks(token) returns the groups of the
// dimensions named in token: the ranks that agree on every other dimension. With world 16,
// tp 2, pp 2 (so dp 4), GetRanks("dp") is [0 2 4 6] [1 3 5 7] [8 10 12 14] [9 11 13 15].
//
// # Layout
//
// Build lays out two grids with the same order, as initialize_model_parallel does:
//
//	dense  grid  tp  × cp × dp  × pp    dp  = world/(tp·pp·cp)
//	expert grid  etp × ep × edp × pp    edp = world/(etp·ep·pp)
//
// (MoE "parallel folding": attention and experts may split the same ranks differently),
// checks that the two grids' pipeline groups coincide, and builds every group kind
// Megatron builds, named as in GroupKinds:
//
//	dense:  tp, cp, dp, pp, dp-cp, tp-cp, tp-dp, tp-dp-cp, tp-pp (model parallel),
//	        embd (first and last stage of each pp group), pos-embd (first stage),
//	        intra-dp-cp
//	expert: expt-tp, ep, expt-dp, tp-ep, tp-ep-pp, intra-expt-dp, inter-dist-opt,
//	        intra-dist-opt
//
// A name is the RankGenerator token that builds the groups when there is one, otherwise
// Megatron's ProcessGroupCollection field with hyphens; GroupKind.Megatron gives the
// ProcessGroupCollection field (e.g. "tp-pp" is pg_collection.mp).
//
// The partial distributed optimizer (NumDistOptInstances = n) cuts every dp-cp group and
// every expt-dp group into n consecutive slices (intra-dp-cp, intra-expt-dp); inter-dist-opt
// joins the ranks at the same position of the n slices of an expt-dp group (built only
// when n > 1, as in Megatron); intra-dist-opt is the concatenation of edp/n consecutive
// tp-ep-pp groups, all the ranks of one optimizer instance.
//
// Hierarchical context-parallel groups and Megatron's GTP weight-rematerialisation axis
// (a no-op at its default) are not built by Layout; HierarchicalGroups computes the former
// for any group.
//
// # Presentation
//
// Layout.WriteTable prints the sizes and every group kind for people; Layout.MarshalJSON
// (and WriteJSON) gives {"world_size", "order", "sizes", "groups"} for programs, the
// groups keyed by the names above.
package mesh
