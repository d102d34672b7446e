package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/config"
)

// newCkptCmd is `gotron ckpt`: inspect, verify and convert checkpoints.
func newCkptCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "ckpt", Short: "Inspect, verify and convert checkpoints"}
	cmd.AddCommand(newCkptInspectCmd(), newCkptConvertCmd())
	return cmd
}

// newCkptInspectCmd is `gotron ckpt inspect DIR [--iteration N] [--json]`.
func newCkptInspectCmd() *cobra.Command {
	var it int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect DIR",
		Short: "Print a distributed checkpoint's manifest and verify every checksum",
		Long: `inspect prints the latest iteration (or --iteration N) of the distributed
checkpoint in DIR (the directory given to --save): its format and layout, the
training state (iteration, consumed samples, optimizer steps, loss scaler),
the run's arguments, the model options that differ from the defaults
(normalization, activation, biases, attention groups, position embedding,
experts and routing, …),
each shard (file, rank, size, pieces) and each tensor (key, shape, pieces). It
then reads every shard completely and checks every checksum block: it prints
"all N blocks of M shards verified", or exits with status 1 listing every
damage, one line each (shard, tensor, piece).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := openCheckpoint(args[0], it, cmd.Flags().Changed("iteration"))
			if err != nil {
				return err
			}
			defer r.Close()
			rep, verr := r.Verify()
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeInspectJSON(out, r, rep, verr); err != nil {
					return err
				}
			} else {
				writeInspect(out, r, rep)
			}
			if verr != nil {
				return damageError(rep, verr)
			}
			if !asJSON {
				fmt.Fprintf(out, "all %d blocks of %d shards verified\n", rep.Blocks, len(rep.Shards))
				if stale := ckpt.Stale(args[0]); len(stale) > 0 {
					fmt.Fprintf(out, "note: interrupted saves left %s; not part of any checkpoint, the next save into %s removes them (or delete them)\n",
						strings.Join(baseNames(stale), ", "), args[0])
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&it, "iteration", 0, "iteration to inspect (default: the latest, as the tracker names it)")
	f.BoolVar(&asJSON, "json", false, `print JSON: {"dir", "manifest": the manifest, "verify": {"ok", "damage": [lines], "blocks", "verified", "damaged", "shards", "tensors", …}}`)
	return cmd
}

// openCheckpoint opens iteration it of the distributed checkpoint in dir,
// or the latest unless given.
func openCheckpoint(dir string, it int, given bool) (*ckpt.Reader, error) {
	var r *ckpt.Reader
	var err error
	if given {
		if it < 0 {
			return nil, fmt.Errorf("--iteration %d: must be a saved iteration (0 or more)", it)
		}
		r, err = ckpt.OpenIteration(dir, it)
	} else {
		r, err = ckpt.Open(dir)
	}
	return r, err
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// megabytes formats n bytes in MB (10⁶ bytes).
func megabytes(n int64) string { return fmt.Sprintf("%.2f", float64(n)/1e6) }

// writeInspect prints the manifest of r and the sizes Verify found, for
// people.
func writeInspect(w io.Writer, r *ckpt.Reader, rep ckpt.VerifyReport) {
	m := r.Manifest
	l := m.Layout
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "checkpoint\t%s\n", r.Dir)
	fmt.Fprintf(tw, "iteration\t%d\n", m.Iteration)
	fmt.Fprintf(tw, "format\t%s\n", m.Format)
	dist := "off"
	if l.DistributedOptimizer {
		dist = "on"
	}
	experts := ""
	if l.EP > 0 {
		experts = fmt.Sprintf(", ep %d, expert tp %d", l.EP, l.ETP)
	}
	fmt.Fprintf(tw, "layout\tworld %d: tp %d, pp %d, vpp %d, cp %d, dp %d%s; distributed optimizer %s\n", l.World, l.TP, l.PP, l.VPP, l.ContextParallel(), l.DP, experts, dist)
	scaler := "none"
	if len(m.GradScaler) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, m.GradScaler) == nil {
			scaler = b.String()
		}
	}
	fmt.Fprintf(tw, "state\titeration %d, consumed samples %d, optimizer steps %d, loss scaler %s\n", m.Iteration, m.ConsumedSamples, m.OptimizerSteps, scaler)
	var args []string
	for _, k := range sortedKeys(m.Args.Ints) {
		args = append(args, fmt.Sprintf("%s=%d", k, m.Args.Ints[k]))
	}
	fmt.Fprintf(tw, "args\t%s\n", strings.Join(args, " "))
	// Every record lists layernorm_epsilon; it is shown when not 1e-5.
	def := strconv.FormatFloat(float64(config.DefaultTransformerConfig().LayernormEpsilon), 'g', -1, 32)
	var opts []string
	for _, k := range sortedKeys(m.Args.Model) {
		if v := m.Args.Model[k]; k != "layernorm_epsilon" || v != def {
			opts = append(opts, k+"="+v)
		}
	}
	model := "defaults (LayerNorm, GELU, biases, learned absolute positions, output layer tied to the embedding, no experts)"
	if len(opts) > 0 {
		model = strings.Join(opts, " ")
	}
	fmt.Fprintf(tw, "model\t%s\n", model)
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "shard\trank\tMB\tpieces\tblocks")
	for _, s := range rep.Shards {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", s.File, s.Rank, megabytes(s.Bytes), s.Pieces, s.Blocks)
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tensor\tshape\tpieces")
	for _, t := range rep.Tensors {
		fmt.Fprintf(tw, "%s\t%v\t%d\n", t.Key, t.Shape, t.Pieces)
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntotal %d bytes (%s MB) in %d shards, %d tensors, %d checksum blocks\n", rep.Bytes, megabytes(rep.Bytes), len(rep.Shards), len(rep.Tensors), rep.Blocks)
}

// inspectJSON is `gotron ckpt inspect --json`'s document.
type inspectJSON struct {
	// Dir is the iteration's directory.
	Dir      string         `json:"dir"`
	Manifest *ckpt.Manifest `json:"manifest"`
	Verify   verifyJSON     `json:"verify"`
	// Stale names what interrupted saves left in the directory (absent:
	// nothing).
	Stale []string `json:"stale,omitempty"`
}

// verifyJSON is the verification's result: OK when nothing is damaged,
// Damage every damage's message (one per damaged block, short shard or
// unreadable piece), and the report's counts, shards and tensors.
type verifyJSON struct {
	OK     bool     `json:"ok"`
	Damage []string `json:"damage"`
	ckpt.VerifyReport
}

// writeInspectJSON prints r's manifest and the verification as JSON.
func writeInspectJSON(w io.Writer, r *ckpt.Reader, rep ckpt.VerifyReport, verr error) error {
	doc := inspectJSON{Dir: r.Dir, Manifest: r.Manifest, Verify: verifyJSON{OK: verr == nil, Damage: damageLines(verr), VerifyReport: rep},
		Stale: baseNames(ckpt.Stale(filepath.Dir(r.Dir)))}
	if doc.Verify.Damage == nil {
		doc.Verify.Damage = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(doc)
}

// damageLines returns the message of each error errors.Join joined in err.
func damageLines(err error) []string {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range j.Unwrap() {
		out = append(out, e.Error())
	}
	return out
}

// checkpointDamage is the error inspect ends with when Verify found
// damage: a summary line, then every damage on its own line.
type checkpointDamage struct {
	rep ckpt.VerifyReport
	err error
}

func (e *checkpointDamage) Error() string {
	lines := damageLines(e.err)
	return fmt.Sprintf("%s: %d of %d checksum blocks damaged or unreadable, %d problems (each below): restore the damaged files or resume from an earlier iteration (gotron train --ckpt-step N)\n%s",
		e.rep.Dir, e.rep.Damaged, e.rep.Blocks, len(lines), strings.Join(lines, "\n"))
}

func (e *checkpointDamage) Unwrap() error { return e.err }

// damageError wraps Verify's error for the command's exit.
func damageError(rep ckpt.VerifyReport, err error) error {
	return &checkpointDamage{rep: rep, err: err}
}

// newCkptConvertCmd is `gotron ckpt convert (--to-whole | --from-whole |
// --to-hf | --from-hf) SRC DST`.
func newCkptConvertCmd() *cobra.Command {
	var toWhole, fromWhole, toHF, fromHF bool
	var tok tokenizerFiles
	cmd := &cobra.Command{
		Use:   "convert (--to-whole | --from-whole | --to-hf | --from-hf) SRC DST",
		Short: "Convert a checkpoint between the distributed, the whole-tensor and Hugging Face's form",
		Long: `convert --to-whole SRC DST reads the latest iteration of the distributed
checkpoint SRC (every checksum verified) and writes it into DST in the
whole-tensor form (model.safetensors with Megatron's parameter names,
optimizer.safetensors with exp_avg.NAME and exp_avg_sq.NAME, state.json).

convert --from-whole SRC DST reads the latest iteration of the whole-tensor
checkpoint SRC and writes it into DST as a distributed checkpoint with one
shard holding every tensor whole, which any layout can load (--load DST).
The layout recorded is the one state.json's arguments name (world, tensor-,
pipeline- and virtual-pipeline-parallel sizes), so that a run of that layout
continues every rank's generator streams.

convert --to-hf SRC DST writes the model of the latest iteration of the
gotron checkpoint SRC (either form) into DST as a Hugging Face checkpoint of
its family — GPT-2 (GPT2LMHeadModel: LayerNorm, learned positions, GELU) or
Llama (LlamaForCausalLM: RMSNorm, RoPE, SwiGLU, no biases) — config.json and
model.safetensors in float32, with the tokenizer files --vocab-file and
--merge-file, or --tokenizer-model, name copied beside them (--gpt2-tokenizer:
GPT-2's own, built into gotron). A model neither
family expresses (MoE, MLA, MTP, …) is refused with every reason.

convert --from-hf SRC DST reads the Hugging Face checkpoint SRC (config.json,
model.safetensors or its index of pieces; F32, F16 or BF16) of the GPT-2 or
Llama family and writes it into DST as a gotron checkpoint at iteration 0
with one shard and no optimizer state: train from it with --load DST
--finetune --use-checkpoint-args. The weights move exactly (transposed,
rows reordered): --to-hf of that checkpoint gives SRC's tensors bit for bit.

DST receives the iteration and its tracker, atomically; it must not already
hold that iteration (or a Hugging Face checkpoint), nor be SRC.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			for _, b := range []bool{toWhole, fromWhole, toHF, fromHF} {
				if b {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("ckpt convert: pass exactly one of --to-whole (SRC distributed, DST whole-tensor), --from-whole (SRC whole-tensor, DST distributed), --to-hf (SRC gotron, DST Hugging Face) and --from-hf (SRC Hugging Face, DST gotron)")
			}
			if !toHF && tok != (tokenizerFiles{}) {
				return fmt.Errorf("ckpt convert: --vocab-file, --merge-file, --tokenizer-model and --gpt2-tokenizer name the tokenizer files --to-hf writes; drop them, or convert --to-hf")
			}
			src, dst := args[0], args[1]
			if sameDir(src, dst) {
				return fmt.Errorf("ckpt convert: SRC and DST are both %s: converting in place would replace the iteration it converts; pass another DST", src)
			}
			out := cmd.OutOrStdout()
			switch {
			case toWhole:
				return convertToWhole(out, src, dst)
			case fromWhole:
				return convertFromWhole(out, src, dst)
			case toHF:
				return convertToHF(out, src, dst, tok)
			}
			return convertFromHF(out, src, dst)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&toWhole, "to-whole", false, "SRC is a distributed checkpoint; write the whole-tensor form into DST")
	f.BoolVar(&fromWhole, "from-whole", false, "SRC is a whole-tensor checkpoint; write a distributed checkpoint into DST")
	f.BoolVar(&toHF, "to-hf", false, "SRC is a gotron checkpoint; write its model as a Hugging Face GPT-2 or Llama checkpoint into DST")
	f.BoolVar(&fromHF, "from-hf", false, "SRC is a Hugging Face GPT-2 or Llama checkpoint; write a gotron checkpoint into DST")
	f.StringVar(&tok.vocab, "vocab-file", "", "with --to-hf: GPT-2's vocab.json to copy into DST")
	f.StringVar(&tok.merges, "merge-file", "", "with --to-hf: GPT-2's merges.txt to copy into DST")
	f.StringVar(&tok.model, "tokenizer-model", "", "with --to-hf: a Hugging Face tokenizer.json (or a directory holding one) to copy into DST")
	f.BoolVar(&tok.gpt2, "gpt2-tokenizer", false, "with --to-hf: write GPT-2's own vocab.json and merges.txt (gotron's built-in GPT2BPETokenizer) into DST")
	return cmd
}

// sameDir reports whether a and b name one directory (the same path, or
// the same file on disk).
func sameDir(a, b string) bool {
	if pa, err := filepath.Abs(a); err == nil {
		if pb, err := filepath.Abs(b); err == nil && pa == pb {
			return true
		}
	}
	sa, ea := os.Stat(a)
	sb, eb := os.Stat(b)
	return ea == nil && eb == nil && os.SameFile(sa, sb)
}

// refuseExisting fails if dst already holds iteration it (a conversion
// would replace it).
func refuseExisting(dst string, it int) error {
	if _, err := os.Stat(ckpt.IterDir(dst, it)); err == nil {
		return fmt.Errorf("ckpt convert: %s already exists: DST holds iteration %d; pass a new or empty DST, or remove it", ckpt.IterDir(dst, it), it)
	}
	return nil
}

// convertToWhole converts the distributed checkpoint src to the
// whole-tensor form in dst.
func convertToWhole(w io.Writer, src, dst string) error {
	r, err := ckpt.Open(src)
	if err != nil {
		if _, e := os.Stat(filepath.Join(src, ckpt.TrackerFile)); e == nil {
			if it, e := ckpt.Latest(src); e == nil {
				if _, e := os.Stat(filepath.Join(ckpt.IterDir(src, it), "state.json")); e == nil {
					return fmt.Errorf("ckpt convert --to-whole: %s holds a whole-tensor checkpoint already: use --from-whole to convert it to the distributed form", src)
				}
			}
		}
		return err
	}
	defer r.Close()
	if err := refuseExisting(dst, r.Manifest.Iteration); err != nil {
		return err
	}
	c, err := ckpt.ToWhole(r)
	if err != nil {
		return err
	}
	if err := ckpt.Save(dst, c); err != nil {
		return err
	}
	fmt.Fprintf(w, "converted iteration %d of %s (%d shards, %d tensors, every checksum verified) into the whole-tensor form in %s\n",
		r.Manifest.Iteration, src, len(r.Manifest.Shards), len(r.Manifest.Tensors), dst)
	return nil
}

// convertFromWhole converts the whole-tensor checkpoint src to a
// distributed checkpoint with one shard in dst.
func convertFromWhole(w io.Writer, src, dst string) error {
	c, err := ckpt.Load(src)
	if err != nil {
		if it, e := ckpt.Latest(src); e == nil {
			if _, e := os.Stat(filepath.Join(ckpt.IterDir(src, it), ckpt.ManifestFile)); e == nil {
				return fmt.Errorf("ckpt convert --from-whole: %s holds a distributed checkpoint: use --to-whole to convert it to the whole-tensor form", src)
			}
		}
		return err
	}
	if err := refuseExisting(dst, c.State.Iteration); err != nil {
		return err
	}
	l := ckpt.WholeLayout(c.State)
	if err := ckpt.FromWhole(dst, c, l); err != nil {
		return err
	}
	how := fmt.Sprintf("the generator states of %d ranks", l.World)
	switch n := len(c.State.RNG); {
	case n == 0:
		how = "no generator states"
	case n%l.World != 0:
		how = fmt.Sprintf("%d generator states, which %d ranks do not divide, all on rank 0", n, l.World)
	}
	fmt.Fprintf(w, "converted iteration %d of %s (%d tensors) into a distributed checkpoint with one shard in %s (layout world %d: tp %d, pp %d, vpp %d; %s)\n",
		c.State.Iteration, src, len(c.Model)+len(c.Optimizer), dst, l.World, l.TP, l.PP, l.VPP, how)
	return nil
}

// baseNames returns each path's last element.
func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}
