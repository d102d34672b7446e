package mesh

// The names of the group kinds a Layout holds. A name is the RankGenerator token that
// builds the groups where there is one (so "tp-pp" is Megatron's model-parallel group,
// pg_collection.mp), and otherwise Megatron's ProcessGroupCollection field name with
// hyphens for underscores. GroupKinds gives, for each, the Megatron field or getter.
const (
	// Dense grid (tp, cp, dp, pp).
	GroupTP        = "tp"          // tensor parallel
	GroupCP        = "cp"          // context parallel
	GroupDP        = "dp"          // data parallel, without cp
	GroupPP        = "pp"          // pipeline parallel
	GroupDPCP      = "dp-cp"       // data parallel with cp: the gradient-reduction group
	GroupTPCP      = "tp-cp"       // tensor and context parallel
	GroupTPDP      = "tp-dp"       // tensor and data parallel, without cp
	GroupTPDPCP    = "tp-dp-cp"    // tensor and data parallel with cp
	GroupMP        = "tp-pp"       // model parallel (Megatron's mp)
	GroupEmbd      = "embd"        // word embedding: first and last stage of each pp group (Sizes.EmbeddingStages with MTP)
	GroupPosEmbd   = "pos-embd"    // position embedding: first stage of each pp group
	GroupIntraDPCP = "intra-dp-cp" // dp-cp within one distributed-optimizer instance

	// Expert grid (etp, ep, edp, pp).
	GroupExptTP       = "expt-tp"        // expert tensor parallel
	GroupEP           = "ep"             // expert model parallel
	GroupExptDP       = "expt-dp"        // expert data parallel
	GroupTPEP         = "tp-ep"          // expert tensor and expert model parallel
	GroupTPEPPP       = "tp-ep-pp"       // expert tensor, expert model and pipeline parallel
	GroupIntraExptDP  = "intra-expt-dp"  // expt-dp within one distributed-optimizer instance
	GroupInterDistOpt = "inter-dist-opt" // the same position across distributed-optimizer instances
	GroupIntraDistOpt = "intra-dist-opt" // all ranks of one distributed-optimizer instance
)

// Grid names the grid a group kind is built on.
const (
	GridDense  = "dense"  // tp, cp, dp, pp
	GridExpert = "expert" // etp, ep, edp, pp
)

// GroupKind describes one kind of group a Layout holds.
type GroupKind struct {
	Name     string // the key of Layout.Groups, e.g. "dp-cp"
	Grid     string // GridDense or GridExpert
	Megatron string // ProcessGroupCollection field, or the parallel_state getter where there is none
	Doc      string // one line: what the group is for
}

// GroupKinds returns every group kind Build can produce, in the order Layout.Names lists
// them: the dense grid's single dimensions, their combinations, the embedding groups and
// the partial distributed-optimizer group; then the expert grid's likewise. The slice is
// new on every call.
func GroupKinds() []GroupKind {
	return []GroupKind{
		{GroupTP, GridDense, "tp", "tensor parallel: all-reduce/all-gather of TP layers"},
		{GroupCP, GridDense, "cp", "context parallel: attention across sequence shards"},
		{GroupDP, GridDense, "dp", "data parallel without cp"},
		{GroupPP, GridDense, "pp", "pipeline stages; P2P next/prev wrap modulo pp"},
		{GroupDPCP, GridDense, "dp_cp", "data parallel with cp: dense gradient reduction"},
		{GroupTPCP, GridDense, "tp_cp", "tensor and context parallel"},
		{GroupTPDP, GridDense, "get_tensor_and_data_parallel_group()", "tensor and data parallel without cp"},
		{GroupTPDPCP, GridDense, "tp_dp_cp", "tensor and data parallel with cp"},
		{GroupMP, GridDense, "mp", "model parallel: tensor and pipeline"},
		{GroupEmbd, GridDense, "embd", "word embedding: first and last pp stage, or the stages holding a copy (tied-embedding and MTP gradients)"},
		{GroupPosEmbd, GridDense, "pos_embd", "position embedding: first pp stage"},
		{GroupIntraDPCP, GridDense, "intra_dp_cp", "dp-cp within one distributed-optimizer instance"},
		{GroupExptTP, GridExpert, "expt_tp", "expert tensor parallel"},
		{GroupEP, GridExpert, "ep", "expert model parallel: token dispatch"},
		{GroupExptDP, GridExpert, "expt_dp", "expert data parallel: expert gradient reduction"},
		{GroupTPEP, GridExpert, "tp_ep", "expert tensor and expert model parallel"},
		{GroupTPEPPP, GridExpert, "tp_ep_pp", "expert tensor, expert model and pipeline parallel"},
		{GroupIntraExptDP, GridExpert, "intra_expt_dp", "expt-dp within one distributed-optimizer instance"},
		{GroupInterDistOpt, GridExpert, "inter_dist_opt", "one rank per distributed-optimizer instance (built only with more than one instance)"},
		{GroupIntraDistOpt, GridExpert, "intra_dist_opt", "all ranks of one distributed-optimizer instance"},
	}
}
