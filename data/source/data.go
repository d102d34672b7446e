package source

import (
	"fmt"
	"strings"

	"github.com/gotron/gotron/data/tokenizer"
)

// DefaultSplit is the train,valid,test split of --data-path when --split is
// unset (Megatron's legacy default).
const DefaultSplit = "969,30,1"

// Data is a run's data flags: exactly one source.
type Data struct {
	MockData bool // --mock-data
	// DataPath is --data-path: indexed datasets (PREFIX.bin/.idx), one prefix
	// or a blend ("0.3 A 0.7 B", or prefixes weighted by their size), divided
	// into train, valid and test by Split. TrainDataPath, ValidDataPath and
	// TestDataPath (--train-data-path ...) give each split its own blend
	// instead.
	DataPath                                   []string
	TrainDataPath, ValidDataPath, TestDataPath []string
	// Split is --split, the train,valid,test proportions of each dataset's
	// documents ("969,30,1" when unset with --data-path).
	Split string
	// DataCachePath is --data-cache-path, where the sample indices are
	// cached ("": PREFIX's directory/cache/GPTDataset_indices).
	DataCachePath string
	// ResetPositionIDs, ResetAttentionMask and EODMaskLoss are
	// --reset-position-ids, --reset-attention-mask and --eod-mask-loss:
	// positions restart after, attention does not cross, and the loss skips
	// end-of-document tokens (indexed data, with --tokenizer-type).
	ResetPositionIDs, ResetAttentionMask, EODMaskLoss bool
	// Tokenizer is --tokenizer-type and its files: the end-of-document id,
	// the vocabulary size when --vocab-size is unset, and the text of
	// samples.
	Tokenizer tokenizer.Options
	// TextDataPath is --text-data-path: text files or directories, trained
	// on as byte-level tokens without preprocessing.
	TextDataPath   []string
	GoStdlibCorpus bool    // --go-stdlib-corpus: the Go standard library's source
	SplitValid     float64 // --split-valid: held-out fraction of text files for validation
}

// IndexedData reports whether the run reads indexed datasets (--data-path or
// the per-split paths).
func (a Data) IndexedData() bool {
	return len(a.DataPath) > 0 || len(a.TrainDataPath) > 0 || len(a.ValidDataPath) > 0 || len(a.TestDataPath) > 0
}

// indexedFlags names the indexed-data flags given: --data-path, or the
// per-split paths.
func (a Data) indexedFlags() string {
	var out []string
	for _, f := range []struct {
		paths []string
		flag  string
	}{{a.DataPath, "--data-path"}, {a.TrainDataPath, "--train-data-path"}, {a.ValidDataPath, "--valid-data-path"}, {a.TestDataPath, "--test-data-path"}} {
		if len(f.paths) > 0 {
			out = append(out, f.flag)
		}
	}
	return strings.Join(out, "/")
}

// DataErrors lists what is wrong with the data flags: not exactly one source,
// options that only apply to some; skipTrain says the run evaluates only
// (--skip-train), which needs no training data.
func (a Data) DataErrors(skipTrain bool) []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	var given []string
	for _, s := range []struct {
		on   bool
		flag string
	}{{a.MockData, "--mock-data"}, {a.IndexedData(), a.indexedFlags()}, {len(a.TextDataPath) > 0, "--text-data-path"}, {a.GoStdlibCorpus, "--go-stdlib-corpus"}} {
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
	if len(a.ValidDataPath) > 0 && len(a.TrainDataPath) == 0 && !skipTrain {
		add("--valid-data-path without --train-data-path: give the training data too")
	}
	if a.Split != "" && len(a.DataPath) == 0 {
		add("--split %q without --data-path: the split divides the --data-path datasets (the per-split paths and text corpora are not split by it)", a.Split)
	}
	if a.DataCachePath != "" && !a.IndexedData() {
		add("--data-cache-path without --data-path: only indexed datasets have cached sample indices")
	}
	for _, f := range []struct {
		on   bool
		flag string
	}{{a.ResetPositionIDs, "--reset-position-ids"}, {a.ResetAttentionMask, "--reset-attention-mask"}, {a.EODMaskLoss, "--eod-mask-loss"}} {
		switch {
		case !f.on:
		case !a.IndexedData():
			add("%s needs indexed data (--data-path): the other sources have no documents to separate", f.flag)
		case a.Tokenizer.Type == "":
			add("%s needs --tokenizer-type: its end-of-document id marks where documents end", f.flag)
		}
	}
	if err := a.Tokenizer.CheckFiles(); err != nil {
		add("%v", err)
	}
	if a.Tokenizer.Type != "" && !a.IndexedData() && !a.MockData && len(given) == 1 {
		add("--tokenizer-type with %s: byte-level text is its own tokenizer; tokenize text with gotron preprocess and train with --data-path", given[0])
	}
	return errs
}
