package train

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotron/gotron/ckpt"
	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/tensor/rng"
)

// rngStates returns the rank's generator states, flattened: the default
// stream, then the tracker's streams in name order (rngPerRank states).
func (t *trainer) rngStates() []int64 {
	states := []rng.State{t.rand.Default.State()}
	tracked := t.rand.Tracker.GetStates()
	for _, name := range t.rand.Tracker.Names() {
		states = append(states, tracked[name])
	}
	out := make([]int64, 0, 4*len(states))
	for _, s := range states {
		for _, x := range s {
			out = append(out, int64(x))
		}
	}
	return out
}

// setRNGStates restores what rngStates gave.
func (t *trainer) setRNGStates(states [][4]uint64) error {
	names := t.rand.Tracker.Names()
	if len(states) != 1+len(names) {
		return fmt.Errorf("%d generator states for %d streams", len(states), 1+len(names))
	}
	t.rand.Default.SetState(states[0])
	tracked := map[string]rng.State{}
	for i, name := range names {
		tracked[name] = states[1+i]
	}
	return t.rand.Tracker.SetStates(tracked)
}

// argsRecord is what a checkpoint records of the run's settings: the
// integer settings, and the model options that differ from their
// defaults (TransformerConfig.Record); resume refuses a checkpoint whose model differs.
func argsRecord(a Args, world int) ckpt.Args {
	m := a.Model
	r := modelShape(m)
	for k, v := range map[string]int{
		"seq_length": m.SeqLength, "global_batch_size": a.GlobalBatchSize, "world_size": world,
		"tensor_model_parallel_size":           max(m.TensorModelParallelSize, 1),
		"pipeline_model_parallel_size":         max(m.PipelineModelParallelSize, 1),
		"virtual_pipeline_model_parallel_size": m.NumModelChunks(),
		"rampup_batch_size_start":              a.RampupBatchSize.Start,
		"rampup_batch_size_increment":          a.RampupBatchSize.Increment,
		"rampup_batch_size_samples":            a.RampupBatchSize.Samples,
	} {
		r[k] = v
	}
	if m.ContextParallelSize > 1 {
		// Recorded only when used (absent: 1), so that the whole-tensor
		// form, which keeps the args, knows the layout its generator
		// states belong to.
		r["context_parallel_size"] = m.ContextParallelSize
	}
	args := ckpt.Args{Ints: r, Model: m.Record(), Data: dataRecord(a)}
	if s := a.stepSchedule(); s != nil {
		args.Data[stepScheduleKey] = s.String()
	}
	if !a.NoSaveOptim {
		// The schedule's state goes with the optimizer's, as Megatron
		// saves opt_param_scheduler only with the optimizer.
		args.Scheduler = schedulerRecord(a)
	}
	return args
}

// modelShape is the model's shape as a checkpoint records it, by
// Megatron's argument names.
func modelShape(m config.TransformerConfig) map[string]int {
	return map[string]int{
		"num_layers": m.NumLayers, "hidden_size": m.HiddenSize, "num_attention_heads": m.NumAttentionHeads,
		"ffn_hidden_size": m.FFN(), "max_position_embeddings": m.MaxPositions(), "vocab_size": m.VocabSize,
	}
}

// ImportedArgs is the record of a checkpoint whose model comes from
// elsewhere (a Hugging Face checkpoint, ckpt/hf): its shape and options
// and the one-rank layout of its single shard, and nothing of a run —
// no sequence length, batch, data or schedule, which the run that loads
// it with --finetune (and --use-checkpoint-args) chooses.
func ImportedArgs(m config.TransformerConfig) ckpt.Args {
	r := modelShape(m)
	r["world_size"], r["tensor_model_parallel_size"], r["pipeline_model_parallel_size"] = 1, 1, 1
	return ckpt.Args{Ints: r, Model: m.Record()}
}

// ModelOfCheckpoint is the model config a checkpoint's record describes:
// the defaults with its shape and options (as --use-checkpoint-args takes
// them).
func ModelOfCheckpoint(saved ckpt.Args) (config.TransformerConfig, error) {
	a, err := useCheckpointArgs(DefaultArgs(), saved)
	return a.Model, err
}

// dataRecord is what a checkpoint records of the run's data: the
// tokenizer (a resume with another is refused, as the reference does) and
// what orders the samples (a resume with other values continues at the
// consumed count of another order, which the start-up line says).
func dataRecord(a Args) map[string]string {
	r := map[string]string{}
	for k, v := range map[string]string{
		"tokenizer_type": a.Tokenizer.Type, "data_path": strings.Join(a.DataPath, " "), "split": a.Split,
		"train_data_path": strings.Join(a.TrainDataPath, " "), "valid_data_path": strings.Join(a.ValidDataPath, " "),
		"text_data_path": strings.Join(a.TextDataPath, " "),
	} {
		if v != "" {
			r[k] = v
		}
	}
	if a.MockData {
		r["mock_data"] = "true"
	}
	if a.GoStdlibCorpus {
		r["go_stdlib_corpus"] = "true"
	}
	r["seed"] = strconv.FormatUint(a.Seed, 10)
	r["seq_length"] = strconv.Itoa(a.Model.SeqLength)
	return r
}

// dataChanges compares the run's data settings with a checkpoint's
// record: a changed tokenizer is an error; other changes are returned as
// a note for the start-up line. A checkpoint without the record (older
// than it) is not compared.
func dataChanges(a Args, saved ckpt.Args) (note string, err error) {
	if saved.Data == nil {
		return "", nil
	}
	now := dataRecord(a)
	if was, is := saved.Data["tokenizer_type"], now["tokenizer_type"]; was != is && !a.Finetune {
		return "", fmt.Errorf("--tokenizer-type %q in the checkpoint, %q in this run: the token ids would mean other text; pass the checkpoint's tokenizer (or --finetune to start afresh on other data)", was, is)
	}
	var diffs []string
	for _, k := range []string{"data_path", "split", "train_data_path", "valid_data_path", "text_data_path", "mock_data", "go_stdlib_corpus", "seed", "seq_length"} {
		if saved.Data[k] != now[k] {
			diffs = append(diffs, fmt.Sprintf("%s %q → %q", k, saved.Data[k], now[k]))
		}
	}
	if len(diffs) == 0 || a.Finetune {
		return "", nil
	}
	return "data settings differ from the checkpoint's (" + strings.Join(diffs, ", ") + "): training continues at the checkpoint's consumed samples of this run's sample order", nil
}

// checkedArgs are the settings a resumed run must share with its
// checkpoint: the model's shapes and head split, and the batch schedule
// (the global batch and its ramp: the data position continues from the
// consumed samples, and the iterations left follow the schedule). The
// model options are compared by TransformerConfig.OptionDiffs.
var checkedArgs = []struct{ key, flag string }{
	{"num_layers", "--num-layers"}, {"hidden_size", "--hidden-size"}, {"num_attention_heads", "--num-attention-heads"},
	{"ffn_hidden_size", "--ffn-hidden-size"}, {"max_position_embeddings", "--max-position-embeddings"},
	{"vocab_size", "--vocab-size"}, {"global_batch_size", "--global-batch-size"},
	{"rampup_batch_size_start", "--rampup-batch-size's start"}, {"rampup_batch_size_increment", "--rampup-batch-size's increment"},
	{"rampup_batch_size_samples", "--rampup-batch-size's samples"},
}

// stepScheduleKey records --step-batch-size-schedule in a checkpoint's
// data settings, in its samples form (data.StepSchedule.String).
const stepScheduleKey = "step_batch_size_schedule"

// stepScheduleDiff describes how the run's step schedule differs from the
// checkpoint's ("" when it does not, or under --finetune): the iterations
// to come follow the schedule from the consumed samples, and the past
// ones followed the checkpoint's.
func stepScheduleDiff(a Args, saved ckpt.Args) string {
	was, is := saved.Data[stepScheduleKey], ""
	if s := a.stepSchedule(); s != nil {
		is = s.String()
	}
	if was == is || a.Finetune {
		return ""
	}
	return fmt.Sprintf("--step-batch-size-schedule %q in the checkpoint, %q in this run (thresholds in samples)", orNone(was), orNone(is))
}

// checkArgs compares the run's settings (normalised) with a checkpoint's
// record (argsRecord's) and lists every difference.
func checkArgs(a Args, saved ckpt.Args) error { return compareArgs(a, saved, false) }

// compareArgs is checkArgs; early, a is not normalised yet (checkLoad,
// before any rank starts): an unset global batch or vocabulary, which
// normalise fills, is not compared (the ranks compare it on resume).
func compareArgs(a Args, saved ckpt.Args, early bool) error {
	savedModel := a.Model
	if v, ok := saved.Ints["ffn_hidden_size"]; ok {
		savedModel.FFNHiddenSize = v // the experts' width when --moe-ffn-hidden-size is unset
	}
	if err := applyModelRecord(&savedModel, saved.Model); err != nil {
		return err
	}
	now := argsRecord(a, 1).Ints
	var diffs []string
	for _, k := range checkedArgs {
		v, ok := saved.Ints[k.key]
		switch {
		case !ok:
			continue // not recorded
		case a.Finetune && (k.key == "global_batch_size" || strings.HasPrefix(k.key, "rampup_")):
			continue // --finetune, whose data start afresh
		case early && (k.key == "global_batch_size" && a.GlobalBatchSize == 0 || k.key == "vocab_size" && a.Model.VocabSize == 0):
			continue
		case k.key == "max_position_embeddings" && !savedModel.LearnedPositions() && !a.Model.LearnedPositions():
			continue // no position embedding table: the sequence may grow
		}
		if want := now[k.key]; v != want {
			d := fmt.Sprintf("%s %d in the checkpoint, %d in this run", k.flag, v, want)
			if k.key == "max_position_embeddings" && a.Model.MaxPositionEmbeddings == 0 {
				d += fmt.Sprintf(" (not given, it follows --seq-length; the checkpoint's position table has %d rows: pass --max-position-embeddings %d and a --seq-length of at most %d)", v, v, v)
			}
			diffs = append(diffs, d)
		}
	}
	if d := stepScheduleDiff(a, saved); d != "" {
		diffs = append(diffs, d)
	}
	model := savedModel.OptionDiffs(a.Model)
	if len(diffs)+len(model) == 0 {
		return nil
	}
	fix := "pass the checkpoint's values"
	if len(model) > 0 {
		fix += " (--use-checkpoint-args takes the model's shape and options from the checkpoint)"
	}
	return fmt.Errorf("the checkpoint's settings differ from this run's: %s: %s", strings.Join(append(diffs, model...), "; "), fix)
}

// checkLoad opens --load's checkpoint before any rank starts, so that a
// missing or damaged one, or one saved from another model, is one error
// (the ranks open it again to read their pieces and compare the batch
// schedule), and implements --use-checkpoint-args: the model's shape and
// options are taken from the checkpoint before the arguments are
// validated. A --load that is also --save and holds no checkpoint yet is
// no error (the run starts from scratch).
func checkLoad(a Args) (Args, error) {
	if a.Load == "" {
		return a, nil
	}
	r, err := openCheckpoint(a)
	if errors.Is(err, ckpt.ErrNoCheckpoint) && a.Save != "" && filepath.Clean(a.Save) == filepath.Clean(a.Load) && !a.UseCheckpointArgs {
		if a.ExitOnMissingCheckpoint {
			return a, fmt.Errorf("--exit-on-missing-checkpoint: %w: it is also --save, and would start from scratch; drop the flag to start so", err)
		}
		return a, nil
	}
	if err != nil {
		if a.UseCheckpointArgs {
			err = fmt.Errorf("--use-checkpoint-args: %w", err)
		}
		return a, err
	}
	defer r.Close()
	where := loadWhere(a, r)
	if a.UseCheckpointArgs {
		if a, err = useCheckpointArgs(a, r.Manifest.Args); err != nil {
			return a, fmt.Errorf("--use-checkpoint-args: %s: %w", where, err)
		}
	} else if err := compareArgs(a, r.Manifest.Args, true); err != nil {
		return a, fmt.Errorf("%s: %w", where, err)
	}
	// The data's changes are told once the checkpoint's shape is taken
	// (its sequence length among them).
	note, err := dataChanges(a, r.Manifest.Args)
	if err != nil {
		return a, fmt.Errorf("%s: %w", where, err)
	}
	a.dataNote = note
	if !a.Finetune {
		a.resumedAt = resumePoint{iteration: r.Manifest.Iteration, consumed: r.Manifest.ConsumedSamples}
	}
	if a, err = resumeScheduler(a, r.Manifest.Args.Scheduler); err != nil {
		return a, fmt.Errorf("%s: %w", where, err)
	}
	return a, nil
}

// loadWhere names the checkpoint r in errors: --load's, or its
// non-persistent one.
func loadWhere(a Args, r *ckpt.Reader) string {
	if dir := loadedDir(r); filepath.Clean(dir) != filepath.Clean(a.Load) {
		return fmt.Sprintf("--load %s's non-persistent checkpoint %s (iteration %d)", a.Load, dir, r.Manifest.Iteration)
	}
	return fmt.Sprintf("--load %s (iteration %d)", a.Load, r.Manifest.Iteration)
}

// loadedDir is the checkpoint directory r reads from (r.Dir is its
// iteration's directory).
func loadedDir(r *ckpt.Reader) string { return filepath.Dir(r.Dir) }

// useCheckpointArgs takes the model's shape and options from the
// checkpoint's record (--use-checkpoint-args).
func useCheckpointArgs(a Args, saved ckpt.Args) (Args, error) {
	m := &a.Model
	for key, field := range map[string]*int{
		"num_layers": &m.NumLayers, "hidden_size": &m.HiddenSize, "num_attention_heads": &m.NumAttentionHeads,
		"ffn_hidden_size": &m.FFNHiddenSize, "seq_length": &m.SeqLength, "max_position_embeddings": &m.MaxPositionEmbeddings,
		"vocab_size": &m.VocabSize,
	} {
		if v, ok := saved.Ints[key]; ok {
			*field = v
		}
	}
	return a, applyModelRecord(m, saved.Model)
}

// applyModelRecord sets m's model options from a checkpoint's record
// (TransformerConfig.ApplyRecord), with the errors a resume prints.
func applyModelRecord(m *config.TransformerConfig, rec map[string]string) error {
	err := m.ApplyRecord(rec)
	var unknown *config.UnknownOptionsError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("the checkpoint records model options this gotron does not know (%s): load it with the gotron that saved it", strings.Join(unknown.Keys, ", "))
	case err != nil:
		return fmt.Errorf("the checkpoint's manifest is damaged: %w", err)
	}
	return nil
}
