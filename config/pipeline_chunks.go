package config

// PipelineChunk is what one model chunk (pipeline rank p, virtual stage v)
// holds.
type PipelineChunk struct {
	PreProcess  bool // holds the embedding (E)
	PostProcess bool // holds the output layer and loss (L)
	LayerOffset int  // global index of its first decoder layer
	NumLayers   int  // number of decoder layers (may be 0)
	MTPLayers   int  // number of MTP layers (m)
	// FinalNorm says the chunk holds the decoder's final layernorm: the
	// loss chunk's, or, with MTP layers, the chunk of the last decoder
	// layer (the reference's rule: the depths read the normed states).
	FinalNorm bool
	// AfterMTP says the chunk comes after a chunk of MTP layers that is
	// not the loss's (a standalone MTP stage): its input holds the main
	// hidden states followed by each depth's, along the sequence.
	AfterMTP bool
}

// HoldsWordEmbedding reports whether the chunk holds the word embedding
// or a copy of it (tied: whether the output layer shares it).
func (ch PipelineChunk) HoldsWordEmbedding(tied bool) bool {
	return HoldsWordEmbedding(ch.PreProcess, ch.PostProcess, ch.MTPLayers > 0, tied)
}

// WordEmbeddingShared reports whether several pipeline ranks hold the
// word embedding, the first one's weight and copies whose gradients the
// word-embedding group sums: with pipelining, when the output layer is
// tied to it or MTP depths embed with it.
func (c TransformerConfig) WordEmbeddingShared() bool {
	return c.PipelineModelParallelSize > 1 && (c.ShareEmbeddingsAndOutputWeights || c.MTPNumLayers > 0)
}

// HoldsWordEmbedding is the rule of which model chunks hold the word
// embedding: the first (pre), the loss's when tied (the output layer's
// copy), and the MTP depths' (they embed the rolled tokens), the
// reference's GPTModel building its embedding when pre_process or
// mtp_process, and sharing it with the output layer.
func HoldsWordEmbedding(pre, post, mtp, tied bool) bool { return pre || mtp || post && tied }

// PipelineChunks returns chunks[p][v] for p < pp, v < vpp (vpp = 1 without
// interleaving): which decoder layers, embedding, loss and MTP layers each
// model chunk holds. It reads the config through ResolvePipelineLayout and
// checks only the rules that decide the placement (the pipeline rules of
// Validate, and num_layers ≥ 1, pp ≥ 1, and vpp only with pp > 1); it
// returns a *ValidationError when one is broken.
//
// The placement is the reference's, case by case:
//
//   - pipeline_model_parallel_layout: chunk (p, v) is stage v·pp + p of the
//     layout (PipelineLayout.NumLayersToBuild and LayerOffset).
//   - otherwise, decoder layers by get_num_layers_to_build
//     (transformer_block.py) and get_transformer_layer_offset
//     (transformer_layer.py), documented at chunkLayers and chunkOffset; the
//     embedding on chunk (0, 0), the loss on chunk (pp−1, vpp−1), and the
//     mtp_num_layers MTP layers with the loss (mtp_on_this_rank).
//
// Without pipelining it is one chunk holding everything: PreProcess and
// PostProcess true, offset 0, NumLayers = num_layers.
//
// Under another PipelinePlacement than the loop (the V of ZB-V) the model
// is cut into the same stages, and chunk (p, v) holds the stage the
// placement gives it: the layers the loop places on the chunk that holds
// that stage. The stages are so the interleaved schedule's, placed
// elsewhere.
func (c TransformerConfig) PipelineChunks() ([][]PipelineChunk, error) {
	loop, err := c.loopChunks()
	if err != nil {
		return nil, err
	}
	c.markNormAndMTP(loop)
	pl := c.PipelinePlacement
	if pl == PlacementLoop {
		return loop, nil
	}
	P, V := len(loop), len(loop[0])
	chunks := make([][]PipelineChunk, P)
	for p := range chunks {
		chunks[p] = make([]PipelineChunk, V)
		for v := range chunks[p] {
			q, w := PlacementLoop.Chunk(P, V, pl.Stage(P, V, p, v))
			chunks[p][v] = loop[q][w]
		}
	}
	return chunks, nil
}

// markNormAndMTP sets FinalNorm and AfterMTP on the loop placement's
// chunks, walking the stages in order (stage v·P + p).
func (c TransformerConfig) markNormAndMTP(chunks [][]PipelineChunk) {
	P, V := len(chunks), len(chunks[0])
	after := false
	for st := range P * V {
		ch := &chunks[st%P][st/P]
		ch.FinalNorm = c.HoldsFinalNorm(ch.PostProcess, ch.LayerOffset, ch.NumLayers)
		ch.AfterMTP = after
		after = after || ch.MTPLayers > 0 && !ch.PostProcess
	}
}

// HoldsFinalNorm reports whether the chunk with the loss or not (post)
// and decoder layers [offset, offset+n) holds the decoder's final
// layernorm: the loss chunk, or, with MTP layers, the chunk of the last
// decoder layer, whose normed output the depths read (the reference's
// TransformerBlock has_final_layernorm_in_this_stage).
func (c TransformerConfig) HoldsFinalNorm(post bool, offset, n int) bool {
	if c.MTPNumLayers > 0 {
		return n > 0 && offset+n == c.NumLayers
	}
	return post
}

// MTPStandalone reports whether the MTP layers sit in a chunk apart from
// the loss (the reference's mtp_standalone, which it derives from the
// layout): the stages after it exchange the main and the depths' hidden
// states, a longer tensor, so pipeline messages carry their shapes.
func (c TransformerConfig) MTPStandalone() bool {
	chunks, err := c.PipelineChunks()
	if err != nil {
		return false
	}
	for _, row := range chunks {
		for _, ch := range row {
			if ch.AfterMTP {
				return true
			}
		}
	}
	return false
}

// WordEmbeddingStages returns the pipeline ranks that hold the word
// embedding or a copy of it (HoldsWordEmbedding), in order: the
// word-embedding group, whose gradients are summed. Nil without MTP
// layers: the group is then the placement's first and last ranks
// (mesh), as the reference's get_embedding_ranks.
func (c TransformerConfig) WordEmbeddingStages() []int {
	if c.MTPNumLayers <= 0 {
		return nil
	}
	chunks, err := c.PipelineChunks()
	if err != nil {
		return nil
	}
	var out []int
	for p, row := range chunks {
		for _, ch := range row {
			if ch.HoldsWordEmbedding(c.ShareEmbeddingsAndOutputWeights) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// loopChunks is PipelineChunks under the loop placement.
func (c TransformerConfig) loopChunks() ([][]PipelineChunk, error) {
	r := c.ResolvePipelineLayout()
	var vs violationList
	r.placementSizeViolations(&vs)
	if err := c.PipelinePlacement.Check(r.NumModelChunks()); err != nil {
		vs.add(fieldList("pipeline_placement", "virtual_pipeline_model_parallel_size"), "%v: set virtual_pipeline_model_parallel_size to 2", err)
	} else if c.PipelinePlacement != PlacementLoop && r.PipelineModelParallelSize < 2 {
		vs.add(fieldList("pipeline_placement", "pipeline_model_parallel_size"),
			"the %v placement runs a microbatch down the pipeline ranks and back, but pipeline_model_parallel_size = %d: set it ≥ 2", c.PipelinePlacement, r.PipelineModelParallelSize)
	}
	r.pipelineViolations(&vs)
	if len(vs) > 0 {
		return nil, NewValidationError(vs)
	}
	P, V := r.PipelineModelParallelSize, r.NumModelChunks()
	chunks := make([][]PipelineChunk, P)
	if r.PipelineModelParallelLayout != "" {
		l, err := ParsePipelineLayout(r.PipelineModelParallelLayout, P)
		if err != nil { // unreachable: pipelineViolations parsed it
			return nil, err
		}
		for p := range chunks {
			chunks[p] = make([]PipelineChunk, V)
			for v := range chunks[p] {
				chunks[p][v] = PipelineChunk{
					PreProcess:  l.NumLayersToBuild(LayerEmbedding, v, p) > 0,
					PostProcess: l.NumLayersToBuild(LayerLoss, v, p) > 0,
					LayerOffset: l.LayerOffset(LayerDecoder, v, p),
					NumLayers:   l.NumLayersToBuild(LayerDecoder, v, p),
					MTPLayers:   l.NumLayersToBuild(LayerMTP, v, p),
				}
			}
		}
		return chunks, nil
	}
	for p := range chunks {
		chunks[p] = make([]PipelineChunk, V)
		for v := range chunks[p] {
			ch := PipelineChunk{
				PreProcess:  p == 0 && v == 0,
				PostProcess: p == P-1 && v == V-1,
				LayerOffset: r.chunkOffset(p, v),
				NumLayers:   r.chunkLayers(p, v),
			}
			if ch.PostProcess {
				ch.MTPLayers = r.MTPNumLayers
			}
			chunks[p][v] = ch
		}
	}
	return chunks, nil
}

// placementSizeViolations checks the sizes PipelineChunks needs that
// Validate checks elsewhere (modelViolations, ModelParallelConfig).
func (c TransformerConfig) placementSizeViolations(vs *violationList) {
	if c.NumLayers <= 0 {
		vs.add(fieldList("num_layers"), "num_layers is %d: it must be a positive integer; set --num-layers", c.NumLayers)
	}
	if c.PipelineModelParallelSize < 1 {
		vs.add(fieldList("pipeline_model_parallel_size"), "pipeline_model_parallel_size = %d: a parallel size must be ≥ 1; set it to 1 to turn this parallelism off", c.PipelineModelParallelSize)
	}
	if vpp := c.VirtualPipelineModelParallelSize; vpp < 0 {
		vs.add(fieldList("virtual_pipeline_model_parallel_size"), "virtual_pipeline_model_parallel_size = %d: must be ≥ 1, or 0 (unset) to use the non-interleaved schedule", vpp)
	} else if vpp > 0 && c.PipelineModelParallelSize == 1 {
		vs.add(fieldList("virtual_pipeline_model_parallel_size", "pipeline_model_parallel_size"),
			"virtual_pipeline_model_parallel_size = %d selects the interleaved schedule, which needs pipeline_model_parallel_size > 1 (here 1): "+
				"raise pipeline_model_parallel_size or unset virtual_pipeline_model_parallel_size (0)", vpp)
	}
}

// chunkLayers is the number of decoder layers of chunk (p, v) without a
// layout (the reference's get_num_layers_to_build), with P = pp, V = vpp:
//
//	uneven (first f and/or last l set): the first (last) rank holds f (l),
//	  each of the M middle ranks (N − f − l)/M;
//	otherwise every rank holds N'/P, N' = N + [account E] + [account L];
//	with interleaving (vpp set, P > 1) a chunk holds its rank's count / V;
//	minus 1 on chunk (0, 0) when the embedding is accounted for, and minus 1
//	on chunk (P−1, V−1) when the loss is.
func (c TransformerConfig) chunkLayers(p, v int) int {
	P, V := c.PipelineModelParallelSize, c.NumModelChunks()
	f, l := c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage
	var perRank int
	if f > 0 || l > 0 {
		middle, stages := c.middleSplit()
		if stages > 0 {
			perRank = middle / stages
		}
		if p == 0 && f > 0 {
			perRank = f
		}
		if p == P-1 && l > 0 {
			perRank = l
		}
	} else {
		perRank = c.splitLayers() / P
	}
	n := perRank
	if c.Interleaved() && P > 1 {
		n = perRank / V
	}
	if c.AccountForEmbeddingInPipelineSplit && p == 0 && v == 0 {
		n--
	}
	if c.AccountForLossInPipelineSplit && p == P-1 && v == V-1 {
		n--
	}
	return n
}

// chunkOffset is the global index of the first decoder layer of chunk
// (p, v) without a layout (the reference's get_transformer_layer_offset).
// With P = 1 it is 0. Otherwise, with N' = N + [account E] + [account L]:
//
//	even, not interleaved:  p·N'/P − [account E ∧ p > 0]
//	even, interleaved:      v·N'/V + p·N'/(P·V) − [account E ∧ (p, v) ≠ (0, 0)]
//	uneven, not interleaved: 0 for p = 0, else f + m·(N − f − l)/M
//	uneven, interleaved:    v·T for p = 0, else v·T + f/V + m·((N − f − l)/V)/M,
//	                        T = f/V + (N − f − l)/V + l/V
//
// where f and l are 0 when unset, M is the number of middle ranks and m = p
// − [f set] is p's index among them. (With M = 0 the reference divides by
// zero here when interleaved; gotron takes the term as 0, which is right:
// the last rank then follows the first directly.)
func (c TransformerConfig) chunkOffset(p, v int) int {
	P, V := c.PipelineModelParallelSize, c.NumModelChunks()
	if P == 1 {
		return 0
	}
	f, l := c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage
	if f > 0 || l > 0 {
		middle, stages := c.middleSplit()
		m := p
		if f > 0 {
			m--
		}
		if c.Interleaved() {
			total := f/V + middle/V + l/V
			if p == 0 {
				return v * total
			}
			var per int
			if stages > 0 {
				per = middle / V / stages
			}
			return v*total + f/V + m*per
		}
		var per int
		if stages > 0 {
			per = middle / stages
		}
		if p == 0 {
			return 0
		}
		return m*per + f
	}
	n := c.splitLayers()
	perRank := n / P
	var off int
	if c.Interleaved() {
		off = v*(n/V) + p*(perRank/V)
	} else {
		off = p * perRank
	}
	if c.AccountForEmbeddingInPipelineSplit && (p != 0 || v != 0) {
		off--
	}
	return off
}

// splitLayers is N' = num_layers + [account_for_embedding_in_pipeline_split]
// + [account_for_loss_in_pipeline_split]: the layers the even split divides.
func (c TransformerConfig) splitLayers() int {
	n := c.NumLayers
	if c.AccountForEmbeddingInPipelineSplit {
		n++
	}
	if c.AccountForLossInPipelineSplit {
		n++
	}
	return n
}

// middleSplit returns, for the uneven split, the layers left for the middle
// ranks, N − f − l, and the number of middle ranks, pp − [f set] − [l set].
func (c TransformerConfig) middleSplit() (layers, ranks int) {
	layers, ranks = c.NumLayers, c.PipelineModelParallelSize
	if f := c.NumLayersInFirstPipelineStage; f > 0 {
		layers -= f
		ranks--
	}
	if l := c.NumLayersInLastPipelineStage; l > 0 {
		layers -= l
		ranks--
	}
	return layers, ranks
}

// LayoutOfChunks returns the layout that places the layers as chunks does:
// stage v·pp + p holds chunk (p, v)'s E (if PreProcess), its NumLayers t,
// its MTPLayers m and its L (if PostProcess). For any configuration
// PipelineChunks accepts, the layout's offsets equal the chunks'. chunks must
// be rectangular (chunks[p][v], every rank with the same number of chunks).
func LayoutOfChunks(chunks [][]PipelineChunk) *PipelineLayout {
	P := len(chunks)
	V := 0
	if P > 0 {
		V = len(chunks[0])
	}
	l := &PipelineLayout{pp: P, vpp: V, stages: make([][]LayerType, P*V), pos: make([][]int, P*V)}
	for v := 0; v < V; v++ {
		for p := 0; p < P; p++ {
			ch := chunks[p][v]
			st := []LayerType{}
			if ch.PreProcess {
				st = append(st, LayerEmbedding)
			}
			for i := 0; i < ch.NumLayers; i++ {
				st = append(st, LayerDecoder)
			}
			for i := 0; i < ch.MTPLayers; i++ {
				st = append(st, LayerMTP)
			}
			if ch.PostProcess {
				st = append(st, LayerLoss)
			}
			l.stages[v*P+p] = st
			l.pos[v*P+p] = make([]int, len(st))
		}
	}
	l.src = l.String()
	base := 0
	for s, st := range l.stages { // positions in the expanded string
		for i := range st {
			l.pos[s][i] = base + i
		}
		base += len(st) + 1
	}
	return l
}
