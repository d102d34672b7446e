package config

import (
	"errors"
	"fmt"
	"strings"
)

// The ways to say how the decoder layers are split over the pipeline, one of:
//
//	even split           num_layers/pp layers per rank (num_layers/(pp·vpp) per chunk)
//	uneven first/last    num_layers_in_first_pipeline_stage, num_layers_in_last_pipeline_stage
//	account for E and L  account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split
//	layout               pipeline_model_parallel_layout
//
// and, for the number of virtual stages, virtual_pipeline_model_parallel_size
// or num_layers_per_virtual_pipeline_stage (training-layer argument) or the
// layout's stage count. PipelineChunks resolves all of them to chunks.

// ResolvePipelineLayout returns c with virtual_pipeline_model_parallel_size
// derived where Megatron derives it, if it is unset (0):
//
//	from pipeline_model_parallel_layout:        vpp = S / pp, the layout's stage count over pp
//	from num_layers_per_virtual_pipeline_stage: vpp = N' / pp / n,  N' = num_layers + [account E] + [account L]
//
// (not with the uneven first/last split, which excludes it), and only when
// the derived vpp is > 1: a single virtual stage stays unset,
// the non-interleaved schedule (TransformerConfig.__post_init__ for the
// layout; megatron/training/arguments.py, which turns a derived 1 into None,
// for both). A vpp that is already set is kept, and so is one that cannot be
// derived (an unparsable layout, indivisible counts): Validate reports those.
// Validate and PipelineChunks read the config through this method; call it
// once, before Finalize, to get the config the rest of gotron uses.
func (c TransformerConfig) ResolvePipelineLayout() TransformerConfig {
	if c.VirtualPipelineModelParallelSize == 0 {
		if v, ok := c.derivedVPP(); ok && v > 1 {
			c.VirtualPipelineModelParallelSize = v
		}
	}
	return c
}

// derivedVPP returns the number of virtual stages the layout or
// num_layers_per_virtual_pipeline_stage implies, and whether one does.
func (c TransformerConfig) derivedVPP() (int, bool) {
	pp := c.PipelineModelParallelSize
	if pp < 1 {
		return 0, false
	}
	if c.PipelineModelParallelLayout != "" {
		stages, _, err := expandLayout(c.PipelineModelParallelLayout)
		if err != nil || len(stages)%pp != 0 {
			return 0, false
		}
		return len(stages) / pp, true
	}
	if n := c.NumLayersPerVirtualPipelineStage; n > 0 && c.NumLayersInFirstPipelineStage <= 0 && c.NumLayersInLastPipelineStage <= 0 {
		total := c.splitLayers()
		if total%pp != 0 || total/pp%n != 0 {
			return 0, false
		}
		return total / pp / n, true
	}
	return 0, false
}

// pipelineViolations reports the pipeline-split rules: the reference's
// TransformerConfig.__post_init__ (docs/SEMANTICS.md § Pipeline split rules),
// its layout validation (§ Pipeline layout strings), the training layer's
// rules for num_layers_per_virtual_pipeline_stage and the even split
// (arguments.py), and the even split's divisibility, which the reference
// asserts only when it builds the model (get_num_layers_to_build). c is read
// as resolved (ResolvePipelineLayout).
func (c TransformerConfig) pipelineViolations(vs *violationList) {
	f, l := c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage
	n := c.NumLayersPerVirtualPipelineStage
	bad := false
	for _, s := range []struct {
		name, unset string
		v           int
	}{
		{"num_layers_in_first_pipeline_stage", "to split the layers evenly", f},
		{"num_layers_in_last_pipeline_stage", "to split the layers evenly", l},
		{"num_layers_per_virtual_pipeline_stage", "for no virtual stages, or to use virtual_pipeline_model_parallel_size", n},
		{"mtp_num_layers", "for no MTP layers", c.MTPNumLayers},
	} {
		if s.v < 0 {
			vs.add(fieldList(s.name), "%s = %d: must be ≥ 1, or 0 (unset) %s", s.name, s.v, s.unset)
			bad = true
		}
	}
	if bad || c.PipelineModelParallelSize < 1 || c.VirtualPipelineModelParallelSize < 0 {
		return // the sizes are reported elsewhere; the rules below need them
	}

	uneven := f > 0 || l > 0
	account := c.AccountForEmbeddingInPipelineSplit || c.AccountForLossInPipelineSplit
	layout := c.PipelineModelParallelLayout != ""
	if uneven && account {
		fs := append(c.setFields(true, false), c.setFields(false, true)...)
		vs.add(fs, "%s cannot be combined with %s: the uneven first/last split already says how many layers the ends hold; "+
			"use one (to keep the embedding and loss stages light, lower --decoder-first-pipeline-num-layers/--decoder-last-pipeline-num-layers)",
			strings.Join(c.setFields(true, false), " and "), strings.Join(c.setFields(false, true), " and "))
	}
	if layout && (uneven || account || n > 0) {
		others := append(c.setFields(true, true), c.setFieldsVirtual()...)
		vs.add(append(fieldList("pipeline_model_parallel_layout"), others...),
			"pipeline_model_parallel_layout cannot be set with other pipeline layout arguments (%s): the layout alone places every layer; drop %s",
			strings.Join(others, ", "), strings.Join(dashedFlags(others), ", "))
	}
	if n > 0 && uneven && !layout {
		vs.add(append(fieldList("num_layers_per_virtual_pipeline_stage"), c.setFields(true, false)...),
			"num_layers_per_virtual_pipeline_stage = %d cannot be used with the uneven first/last split (%s): the ranks hold different numbers of layers; "+
				"set the number of virtual stages with --virtual-pipeline-model-parallel-size instead",
			n, strings.Join(c.setFields(true, false), ", "))
	}
	switch {
	case layout:
		c.layoutViolations(vs)
	case c.NumLayers <= 0: // reported elsewhere; the splits below need it
	case uneven:
		c.unevenViolations(vs)
	default:
		c.evenViolations(vs)
	}
}

// setFields names the uneven (first/last) and/or account_for settings that
// are set.
func (c TransformerConfig) setFields(uneven, account bool) []string {
	var fs []string
	if uneven && c.NumLayersInFirstPipelineStage > 0 {
		fs = append(fs, "num_layers_in_first_pipeline_stage")
	}
	if uneven && c.NumLayersInLastPipelineStage > 0 {
		fs = append(fs, "num_layers_in_last_pipeline_stage")
	}
	if account && c.AccountForEmbeddingInPipelineSplit {
		fs = append(fs, "account_for_embedding_in_pipeline_split")
	}
	if account && c.AccountForLossInPipelineSplit {
		fs = append(fs, "account_for_loss_in_pipeline_split")
	}
	return fs
}

func (c TransformerConfig) setFieldsVirtual() []string {
	if c.NumLayersPerVirtualPipelineStage > 0 {
		return []string{"num_layers_per_virtual_pipeline_stage"}
	}
	return nil
}

// dashedFlags returns the command-line flags of config fields.
func dashedFlags(fields []string) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		switch f {
		case "num_layers_in_first_pipeline_stage":
			out[i] = "--decoder-first-pipeline-num-layers"
		case "num_layers_in_last_pipeline_stage":
			out[i] = "--decoder-last-pipeline-num-layers"
		default:
			out[i] = "--" + dashed(f)
		}
	}
	return out
}

// layoutViolations parses and checks pipeline_model_parallel_layout.
func (c TransformerConfig) layoutViolations(vs *violationList) {
	const name = "pipeline_model_parallel_layout"
	addLayout := func(e *LayoutError) {
		fs := fieldList(name)
		if e.field != "" {
			fs = append(fs, e.field)
		}
		vs.add(fs, "%s", e.Error())
	}
	stages, pos, err := expandLayout(c.PipelineModelParallelLayout)
	if err != nil {
		var e *LayoutError
		if errors.As(err, &e) {
			addLayout(e)
		}
		return
	}
	pp := c.PipelineModelParallelSize
	l := &PipelineLayout{src: c.PipelineModelParallelLayout, pp: pp, stages: stages, pos: pos}
	for _, e := range l.layerProblems(c.NumLayers, c.MTPNumLayers) {
		addLayout(e)
	}
	if e := l.divisibilityProblem(); e != nil {
		addLayout(e)
		return
	}
	l.vpp = len(stages) / pp
	if vpp := c.VirtualPipelineModelParallelSize; vpp > 0 && vpp != l.vpp {
		vs.add(fieldList(name, "virtual_pipeline_model_parallel_size", "pipeline_model_parallel_size"),
			"%s %q has %d stages = pipeline_model_parallel_size %d × %d virtual stages, but virtual_pipeline_model_parallel_size is %d: "+
				"leave virtual_pipeline_model_parallel_size unset (0) to take it from the layout, or write %d·%d = %d stages",
			name, c.PipelineModelParallelLayout, len(stages), pp, l.vpp, vpp, pp, vpp, pp*vpp)
	}
	for _, e := range l.placementProblems(c.MTPNumLayers) {
		addLayout(e)
	}
}

// evenViolations checks the even split: N' = num_layers + [account E] +
// [account L] divisible by pp (arguments.py), and N'/pp divisible by the
// number of virtual stages (get_num_layers_to_build), or by
// num_layers_per_virtual_pipeline_stage.
func (c TransformerConfig) evenViolations(vs *violationList) {
	pp, vpp, n := c.PipelineModelParallelSize, c.VirtualPipelineModelParallelSize, c.NumLayersPerVirtualPipelineStage
	total := c.splitLayers()
	extra := total - c.NumLayers
	layers := fmt.Sprintf("num_layers %d", c.NumLayers)
	if extra > 0 {
		var parts []string
		if c.AccountForEmbeddingInPipelineSplit {
			parts = append(parts, "1 (embedding, account_for_embedding_in_pipeline_split)")
		}
		if c.AccountForLossInPipelineSplit {
			parts = append(parts, "1 (loss, account_for_loss_in_pipeline_split)")
		}
		layers = fmt.Sprintf("num_layers %d + %s = %d", c.NumLayers, strings.Join(parts, " + "), total)
	}
	fields := append(fieldList("num_layers", "pipeline_model_parallel_size"), c.setFields(false, true)...)
	alternatives := ", or --decoder-first-pipeline-num-layers/--decoder-last-pipeline-num-layers, or --pipeline-model-parallel-layout"
	if extra > 0 {
		alternatives = ", or --pipeline-model-parallel-layout"
	}
	if total%pp != 0 {
		vs.add(fields, "%s is not divisible by pipeline_model_parallel_size %d: use --num-layers %s%s",
			layers, pp, nearestLayerCounts(total, pp, extra), alternatives)
		return
	}
	perRank := total / pp
	switch {
	case n > 0:
		if perRank%n != 0 {
			vs.add(append(fields, "num_layers_per_virtual_pipeline_stage"),
				"num_layers_per_virtual_pipeline_stage %d does not divide the %s / pipeline_model_parallel_size %d = %d layers per pipeline rank: use a divisor of %d (%s)",
				n, layers, pp, perRank, perRank, divisors(perRank))
			return
		}
		if d := perRank / n; vpp > 0 && vpp != d {
			vs.add(fieldList("num_layers_per_virtual_pipeline_stage", "virtual_pipeline_model_parallel_size"),
				"virtual_pipeline_model_parallel_size %d disagrees with num_layers_per_virtual_pipeline_stage %d, which gives %d / %d = %d virtual stages per pipeline rank: set only one of them",
				vpp, n, perRank, n, d)
		}
	case vpp > 0 && pp > 1 && perRank%vpp != 0:
		vs.add(append(fields, "virtual_pipeline_model_parallel_size"),
			"%s / pipeline_model_parallel_size %d = %d layers per pipeline rank is not divisible by virtual_pipeline_model_parallel_size %d "+
				"(every model chunk holds the same number of layers): use --num-layers %s (a multiple of pp·vpp = %d), or a virtual_pipeline_model_parallel_size dividing %d (%s), or --pipeline-model-parallel-layout",
			layers, pp, perRank, vpp, nearestLayerCounts(total, pp*vpp, extra), pp*vpp, perRank, divisors(perRank))
	}
}

// unevenViolations checks the uneven first/last split (the reference's
// TransformerConfig.__post_init__), with vpp the number of virtual stages.
// gotron also refuses two cases the reference lets through to nonsense:
// first + last > num_layers with middle ranks (a negative count per middle
// rank), and both set with pp = 1.
func (c TransformerConfig) unevenViolations(vs *violationList) {
	const first, last = "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"
	f, l := c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage
	pp, vpp := c.PipelineModelParallelSize, c.VirtualPipelineModelParallelSize
	for _, e := range []struct {
		name, flag, rank string
		v                int
	}{{first, "--decoder-first-pipeline-num-layers", "first", f}, {last, "--decoder-last-pipeline-num-layers", "last", l}} {
		if e.v > 0 && vpp > 0 && e.v%vpp != 0 {
			vs.add(fieldList(e.name, "virtual_pipeline_model_parallel_size"),
				"%s %d is not divisible by virtual_pipeline_model_parallel_size %d (%d mod %d = %d): the %s rank's %d model chunks hold the same number of layers; use %s %s",
				e.name, e.v, vpp, e.v, vpp, e.v%vpp, e.rank, vpp, e.flag, nearestMultiples(e.v, vpp, vpp))
		}
	}
	middle, ranks := c.middleSplit()
	set := c.setFields(true, false)
	terms := fmt.Sprintf("num_layers %d", c.NumLayers)
	if f > 0 {
		terms += fmt.Sprintf(" − %s %d", first, f)
	}
	if l > 0 {
		terms += fmt.Sprintf(" − %s %d", last, l)
	}
	middleRanks := fmt.Sprintf("%d middle pipeline stages (pipeline_model_parallel_size %d − %d)", ranks, pp, pp-ranks)
	switch {
	case ranks < 0:
		vs.add(fieldList(first, last, "pipeline_model_parallel_size"),
			"%s and %s are both set, but pipeline_model_parallel_size is %d: the first and last stage are the same rank; set one of them (to num_layers %d) or use pipeline_model_parallel_size ≥ 2",
			first, last, pp, c.NumLayers)
	case middle < 0:
		vs.add(append(fieldList("num_layers"), set...),
			"%s = %d: the first and last stages ask for more layers than the model's num_layers %d; lower %s",
			terms, middle, c.NumLayers, strings.Join(dashedFlags(set), " or "))
	case middle > 0 && ranks == 0:
		vs.add(append(fieldList("num_layers", "pipeline_model_parallel_size"), set...),
			"%s = %d layers remain but no middle pipeline stage is left to hold them (pipeline_model_parallel_size %d): "+
				"make the first and last stages hold all %d layers, or raise pipeline_model_parallel_size",
			terms, middle, pp, c.NumLayers)
	case middle == 0 && ranks > 0:
		vs.add(append(fieldList("num_layers", "pipeline_model_parallel_size"), set...),
			"%s = 0 layers remain for the %s, which would be empty: lower %s, or lower pipeline_model_parallel_size",
			terms, middleRanks, strings.Join(dashedFlags(set), " or "))
	case ranks > 0 && middle%ranks != 0:
		r := middle % ranks
		flag, v := "--decoder-first-pipeline-num-layers", f
		if f == 0 {
			flag, v = "--decoder-last-pipeline-num-layers", l
		}
		fix := fmt.Sprint(v + r) // r fewer middle layers
		if v-(ranks-r) >= 1 {
			fix = fmt.Sprintf("%d or %d", v-(ranks-r), v+r) // ranks−r more, or r fewer
		}
		vs.add(append(fieldList("num_layers", "pipeline_model_parallel_size"), set...),
			"%s = %d middle layers are not divisible by the %d middle pipeline stages (pipeline_model_parallel_size %d − %d; %d mod %d = %d): use e.g. %s %s",
			terms, middle, ranks, pp, pp-ranks, middle, ranks, r, flag, fix)
	case ranks > 0 && vpp > 0 && middle/ranks%vpp != 0:
		vs.add(append(fieldList("num_layers", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size"), set...),
			"each of the %d middle pipeline ranks holds (%s) / %d = %d layers, not divisible by virtual_pipeline_model_parallel_size %d "+
				"(pipeline_model_parallel_size %d − %d end ranks): every model chunk of a rank holds the same number of layers; change the first/last counts or num_layers so that the middle ranks hold a multiple of %d",
			ranks, terms, ranks, middle/ranks, vpp, pp, pp-ranks, vpp)
	}
}

// nearestLayerCounts returns the num_layers values nearest to total − extra
// for which num_layers + extra is a multiple of m, as "4 or 8".
func nearestLayerCounts(total, m, extra int) string {
	lo := total/m*m - extra
	hi := lo + m
	if lo < 1 {
		for hi < 1 {
			hi += m
		}
		return fmt.Sprint(hi)
	}
	return fmt.Sprintf("%d or %d", lo, hi)
}

// divisors lists the divisors of n ≥ 1 in increasing order, as "1, 2, 4".
func divisors(n int) string {
	var lo, hi []string
	for d := 1; d*d <= n; d++ {
		if n%d == 0 {
			lo = append(lo, fmt.Sprint(d))
			if d*d != n {
				hi = append([]string{fmt.Sprint(n / d)}, hi...)
			}
		}
	}
	return strings.Join(append(lo, hi...), ", ")
}
