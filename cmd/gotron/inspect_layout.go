package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/pp"
)

func newInspectLayoutCmd() *cobra.Command {
	var pf pipelineFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "layout",
		Short: "Print which layers each pipeline rank and virtual stage holds",
		Long: `layout prints the decoder layers, embedding (E), MTP layers (m) and loss (L)
each model chunk (pipeline rank, virtual stage) holds, however the split is
given: evenly (--num-layers over --pipeline-model-parallel-size, with
--virtual-pipeline-model-parallel-size or --num-layers-per-virtual-pipeline-stage),
unevenly (--decoder-first/last-pipeline-num-layers), with the embedding and
loss counted as layers (--account-for-*-in-pipeline-split), or by a layout
string (--pipeline-model-parallel-layout "Et*3|(tt|)*29,m|L"). With a layout,
--num-layers and --mtp-num-layers default to the layout's counts. With
--pipeline-schedule zb-v (or dualpipev) the same stages are placed in a V: rank r's virtual
stage 0 holds stage r and its virtual stage 1 stage 2P−1−r, so rank 0 holds
the embedding and the loss; the layout line still lists the stages in model
order.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := pf.config(cmd)
			if err != nil {
				return err
			}
			inOrder := c
			inOrder.PipelinePlacement = config.PlacementLoop
			loop, err := inOrder.PipelineChunks() // the stages, in model order
			if err != nil {
				return err
			}
			chunks, err := c.PipelineChunks()
			if err != nil {
				return err
			}
			stages := config.LayoutOfChunks(loop)
			if asJSON {
				return writeLayoutJSON(cmd.OutOrStdout(), stages, chunks)
			}
			return writeLayoutTable(cmd.OutOrStdout(), c, stages, chunks)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	pf.add(f)
	f.BoolVar(&asJSON, "json", false, `print JSON: {"stages": [["E","t",…],…], "ranks": [{"rank", "chunks": [{"vpp", "layers", "decoder_offset"}]}]}`)
	return cmd
}

// pipelineFlags are the flags that place a model's layers on pipeline
// ranks, shared by inspect layout and inspect groups.
type pipelineFlags struct {
	c        config.TransformerConfig
	schedule string
}

func (pf *pipelineFlags) add(f *pflag.FlagSet) {
	c := &pf.c
	*c = config.DefaultTransformerConfig()
	f.IntVar(&c.NumLayers, "num-layers", 0, "decoder layers (default with a layout: its number of t)")
	f.IntVar(&c.PipelineModelParallelSize, "pipeline-model-parallel-size", 1, "pipeline-parallel size")
	f.IntVar(&c.VirtualPipelineModelParallelSize, "virtual-pipeline-model-parallel-size", 0, "model chunks per pipeline rank (0: none, or derived from the layout or --num-layers-per-virtual-pipeline-stage)")
	f.IntVar(&c.NumLayersPerVirtualPipelineStage, "num-layers-per-virtual-pipeline-stage", 0, "decoder layers per model chunk of the even split (sets the virtual stages)")
	f.StringVar(&c.PipelineModelParallelLayout, "pipeline-model-parallel-layout", "", `layout string: stages split by |, E embedding, t decoder, m MTP, L loss, (…)*N and x*N repeat, e.g. "Et*3|(tt|)*29,m|L"`)
	f.IntVar(&c.NumLayersInFirstPipelineStage, "decoder-first-pipeline-num-layers", 0, "decoder layers on the first pipeline rank (0: even split)")
	f.IntVar(&c.NumLayersInLastPipelineStage, "decoder-last-pipeline-num-layers", 0, "decoder layers on the last pipeline rank (0: even split)")
	f.BoolVar(&c.AccountForEmbeddingInPipelineSplit, "account-for-embedding-in-pipeline-split", false, "count the embedding as a layer of the even split")
	f.BoolVar(&c.AccountForLossInPipelineSplit, "account-for-loss-in-pipeline-split", false, "count the loss as a layer of the even split")
	f.IntVar(&c.MTPNumLayers, "mtp-num-layers", 0, "multi-token-prediction layers (default with a layout: its number of m)")
	f.StringVar(&pf.schedule, "pipeline-schedule", "", "pipeline schedule the chunks are placed for: zb-v and dualpipev place them in a V (with 2 virtual stages); any other, the reference's loop")
}

// config returns the flags' config: --num-layers and --mtp-num-layers
// from the layout when not given, the schedule checked against the
// pipeline and its placement set.
func (pf *pipelineFlags) config(cmd *cobra.Command) (config.TransformerConfig, error) {
	c := pf.c
	if s := c.PipelineModelParallelLayout; s != "" && (!cmd.Flags().Changed("num-layers") || !cmd.Flags().Changed("mtp-num-layers")) {
		l, err := config.ParsePipelineLayout(s, 1)
		if err != nil {
			return c, err
		}
		if !cmd.Flags().Changed("num-layers") {
			c.NumLayers = l.Count(config.LayerDecoder)
		}
		if !cmd.Flags().Changed("mtp-num-layers") {
			c.MTPNumLayers = l.Count(config.LayerMTP)
		}
	}
	if pf.schedule != "" {
		r := c.ResolvePipelineLayout()
		if err := (pp.Config{PP: r.PipelineModelParallelSize, VPP: r.VirtualPipelineModelParallelSize, Schedule: pf.schedule}).CheckSchedule(); err != nil {
			return c, err
		}
	}
	c.PipelinePlacement = pp.PlacementOf(pf.schedule)
	return c, nil
}

// layoutJSON is the --json document: the stages in layout order (stage
// v·pp + p), and per pipeline rank the global indices of the decoder layers
// of each of its chunks.
type layoutJSON struct {
	Stages [][]string   `json:"stages"`
	Ranks  []layoutRank `json:"ranks"`
}

type layoutRank struct {
	Rank   int           `json:"rank"`
	Chunks []layoutChunk `json:"chunks"`
}

type layoutChunk struct {
	VPP           int   `json:"vpp"`
	Layers        []int `json:"layers"`
	DecoderOffset int   `json:"decoder_offset"`
}

func writeLayoutJSON(w io.Writer, stages *config.PipelineLayout, chunks [][]config.PipelineChunk) error {
	doc := layoutJSON{Stages: [][]string{}, Ranks: []layoutRank{}}
	for _, st := range stages.Stages() {
		letters := []string{}
		for _, t := range st {
			letters = append(letters, t.Letter())
		}
		doc.Stages = append(doc.Stages, letters)
	}
	for p, row := range chunks {
		r := layoutRank{Rank: p, Chunks: []layoutChunk{}}
		for v, ch := range row {
			layers := []int{}
			for i := 0; i < ch.NumLayers; i++ {
				layers = append(layers, ch.LayerOffset+i)
			}
			r.Chunks = append(r.Chunks, layoutChunk{VPP: v, Layers: layers, DecoderOffset: ch.LayerOffset})
		}
		doc.Ranks = append(doc.Ranks, r)
	}
	return json.NewEncoder(w).Encode(doc)
}

func writeLayoutTable(w io.Writer, c config.TransformerConfig, stages *config.PipelineLayout, chunks [][]config.PipelineChunk) error {
	pp, vpp := len(chunks), len(chunks[0])
	fmt.Fprintf(w, "pipeline_model_parallel_size %d × %d virtual stages, num_layers %d", pp, vpp, c.NumLayers)
	if c.MTPNumLayers > 0 {
		fmt.Fprintf(w, ", mtp_num_layers %d", c.MTPNumLayers)
	}
	fmt.Fprintf(w, "\nlayout %s\n", stages)
	if c.PipelinePlacement != config.PlacementLoop {
		fmt.Fprintf(w, "placed in a %s: rank r's virtual stage 0 holds stage r, its virtual stage 1 stage 2P−1−r\n", strings.ToUpper(c.PipelinePlacement.String()))
	}
	if c.MTPNumLayers > 0 {
		fmt.Fprintln(w, "E embedding, tI-J decoder layers I to J (the last with the final layernorm), m MTP layer, L output layer and loss")
	} else {
		fmt.Fprintln(w, "E embedding, tI-J decoder layers I to J, m MTP layer, L final layernorm, output layer and loss")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	head := []string{"pp rank"}
	for v := 0; v < vpp; v++ {
		head = append(head, fmt.Sprintf("vp stage %d", v))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for p, row := range chunks {
		cells := []string{fmt.Sprint(p)}
		for _, ch := range row {
			cells = append(cells, chunkCell(ch))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// chunkCell describes a chunk as "E t0-2", "t5", "m L", "(empty)".
func chunkCell(ch config.PipelineChunk) string {
	var parts []string
	if ch.PreProcess {
		parts = append(parts, "E")
	}
	switch ch.NumLayers {
	case 0:
	case 1:
		parts = append(parts, fmt.Sprintf("t%d", ch.LayerOffset))
	default:
		parts = append(parts, fmt.Sprintf("t%d-%d", ch.LayerOffset, ch.LayerOffset+ch.NumLayers-1))
	}
	if ch.MTPLayers > 0 {
		parts = append(parts, strings.Repeat("m", ch.MTPLayers))
	}
	if ch.PostProcess {
		parts = append(parts, "L")
	}
	if len(parts) == 0 {
		return "(empty)"
	}
	return strings.Join(parts, " ")
}
