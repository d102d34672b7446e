package train

import (
	"fmt"
	"strings"
)

// DefaultSplit is the train,valid,test split of --data-path when --split is
// unset (Megatron's legacy default).
const DefaultSplit = "969,30,1"

// indexedData reports whether the run reads indexed datasets (--data-path or
// the per-split paths).
func (a Args) indexedData() bool {
	return len(a.DataPath) > 0 || len(a.TrainDataPath) > 0 || len(a.ValidDataPath) > 0 || len(a.TestDataPath) > 0
}

// dataErrors checks the data flags: exactly one source, and the options
// that only apply to some.
func (a Args) dataErrors() []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	var given []string
	for _, s := range []struct {
		on   bool
		flag string
	}{{a.MockData, "--mock-data"}, {a.indexedData(), "--data-path"}, {len(a.TextDataPath) > 0, "--text-data-path"}, {a.GoStdlibCorpus, "--go-stdlib-corpus"}} {
		if s.on {
			given = append(given, s.flag)
		}
	}
	if len(given) != 1 {
		got := "none"
		if len(given) > 0 {
			got = strings.Join(given, " and ")
		}
		add("give exactly one data source: --mock-data, --data-path PREFIX (indexed datasets, see gotron preprocess), --text-data-path PATH (byte-level text) or --go-stdlib-corpus (got %s)", got)
	}
	perSplit := len(a.TrainDataPath) > 0 || len(a.ValidDataPath) > 0 || len(a.TestDataPath) > 0
	if len(a.DataPath) > 0 && perSplit {
		add("--data-path with --train-data-path, --valid-data-path or --test-data-path: give one blend split by --split, or one blend per split")
	}
	if len(a.TestDataPath) > 0 {
		add("--test-data-path: gotron evaluates no test split (the reference's evaluation on it after training is not provided): drop the flag")
	}
	if perSplit && len(a.TrainDataPath) == 0 && !a.SkipTrain {
		add("--valid-data-path without --train-data-path: give the training data too")
	}
	if a.Split != "" && len(a.DataPath) == 0 {
		add("--split %q without --data-path: the split divides the --data-path datasets (the per-split paths and text corpora are not split by it)", a.Split)
	}
	if a.DataCachePath != "" && !a.indexedData() {
		add("--data-cache-path without --data-path: only indexed datasets have cached sample indices")
	}
	for _, f := range []struct {
		on   bool
		flag string
	}{{a.ResetPositionIDs, "--reset-position-ids"}, {a.ResetAttentionMask, "--reset-attention-mask"}, {a.EODMaskLoss, "--eod-mask-loss"}} {
		switch {
		case !f.on:
		case !a.indexedData():
			add("%s needs indexed data (--data-path): the other sources have no documents to separate", f.flag)
		case a.Tokenizer.Type == "":
			add("%s needs --tokenizer-type: its end-of-document id marks where documents end", f.flag)
		}
	}
	if err := a.Tokenizer.CheckFiles(); err != nil {
		add("%v", err)
	}
	if a.Tokenizer.Type != "" && !a.indexedData() && !a.MockData {
		add("--tokenizer-type with %s: byte-level text is its own tokenizer; tokenize text with gotron preprocess and train with --data-path", strings.Join(given, ""))
	}
	return errs
}
