package source

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotron/gotron/data/gptdata"
	"github.com/gotron/gotron/data/indexed"
)

// openIndexed builds Megatron's GPTDatasets over the --data-path blend (split
// by --split) or the per-split blends.
func openIndexed(a Data, n Need) (*Sets, error) {
	ds, err := BuildIndexed(a, n)
	if err != nil {
		return nil, err
	}
	d := &Sets{Vocab: n.Vocab, Tok: n.Tok}
	if ds[0] != nil {
		d.Train = gptdata.NewBatches(ds[0])
	}
	if ds[1] != nil && n.Evaluates {
		d.Valid = gptdata.NewBatches(ds[1])
	}
	d.Desc = describeIndexed(a, n, ds)
	return d, nil
}

// BuildIndexed builds the train, valid and test GPTDatasets of indexed
// data (nil: a split without documents or samples); a run that trains
// needs the train split.
func BuildIndexed(a Data, n Need) ([3]gptdata.Dataset, error) {
	ds, counts, err := buildSplits(a, n)
	if err == nil && ds[0] == nil && counts[0] > 0 {
		err = fmt.Errorf("invalid arguments: --split %q leaves no documents for training: give the train split a share", a.Split)
	}
	return ds, err
}

// buildSplits builds the datasets and returns them with the samples asked
// of each.
func buildSplits(a Data, n Need) ([3]gptdata.Dataset, [3]int, error) {
	var ds [3]gptdata.Dataset
	cfg := gptdata.Config{
		SeqLength: n.SeqLength, Seed: n.Seed, Split: a.Split, CachePath: a.DataCachePath,
		ResetPositionIDs: a.ResetPositionIDs, ResetAttentionMask: a.ResetAttentionMask, EODMaskLoss: a.EODMaskLoss,
	}
	if n.Tok != nil {
		cfg.EOD = n.Tok.EOD()
	}
	if n.Seed > math.MaxUint32 {
		return ds, [3]int{}, fmt.Errorf("invalid arguments: --seed %d with --data-path: the sample order uses numpy's generator, whose seed lies in [0, 2^32−1]: choose a smaller --seed", n.Seed)
	}
	counts := n.Samples
	var err error
	if len(a.DataPath) > 0 {
		blend, err := gptdata.ParseBlend(a.DataPath)
		if err != nil {
			return ds, counts, fmt.Errorf("invalid arguments: %w", err)
		}
		ds, err = gptdata.Build(cfg, blend, counts, opener("--data-path"))
		return ds, counts, err
	}
	var blends [3]gptdata.Blend
	for i, p := range [][]string{a.TrainDataPath, a.ValidDataPath, a.TestDataPath} {
		if len(p) == 0 {
			counts[i] = 0
			continue
		}
		if blends[i], err = gptdata.ParseBlend(p); err != nil {
			return ds, counts, fmt.Errorf("invalid arguments: --%s-data-path: %w", [3]string{"train", "valid", "test"}[i], err)
		}
	}
	ds, err = gptdata.BuildPerSplit(cfg, blends, counts, opener("--train-data-path/--valid-data-path"))
	return ds, counts, err
}

// describeIndexed names the data for the start-up line: the paths, the
// split and the samples of each split.
func describeIndexed(a Data, n Need, ds [3]gptdata.Dataset) string {
	var b strings.Builder
	if len(a.DataPath) > 0 {
		split := a.Split
		if split == "" {
			split = DefaultSplit
		}
		fmt.Fprintf(&b, "--data-path %s split %s", strings.Join(a.DataPath, " "), split)
	} else {
		b.WriteString("per-split data paths")
	}
	if n.Tok != nil {
		fmt.Fprintf(&b, ", %s", n.Tok.Name())
	}
	for i, name := range []string{"train", "valid"} {
		if ds[i] != nil {
			fmt.Fprintf(&b, ", %d %s samples", ds[i].Len(), name)
		}
	}
	if ds[1] == nil && n.Evaluates {
		b.WriteString(", no validation (the valid split holds no documents: give it a share with --split, or pass --valid-data-path)")
	}
	return b.String()
}

// opener returns the function that opens a dataset of the flag: the
// indexed dataset PREFIX.bin/.idx. The errors name the flag, and say what
// a user likely meant: the PREFIX_KEY_document that gotron preprocess
// wrote for an --output-prefix, the datasets inside a directory, or, for
// a text file or directory, the gotron preprocess command that makes one.
func opener(flag string) func(prefix string) (gptdata.Source, error) {
	return func(prefix string) (gptdata.Source, error) {
		ds, err := indexed.Open(prefix)
		if err == nil {
			return ds, nil
		}
		ext := filepath.Ext(prefix)
		if _, e := os.Stat(prefix + ".idx"); !errors.Is(e, fs.ErrNotExist) || ext == ".bin" || ext == ".idx" {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		if _, e := os.Stat(prefix + "_text_document.idx"); e == nil {
			return nil, fmt.Errorf("%s %s: no %s.idx, but %s_text_document.idx exists: pass the dataset gotron preprocess wrote for --output-prefix %s, --data-path %s_text_document",
				flag, prefix, prefix, prefix, prefix, prefix)
		}
		st, e := os.Stat(prefix)
		if e != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		if st.IsDir() {
			if found, _ := filepath.Glob(filepath.Join(prefix, "*.idx")); len(found) > 0 {
				for i := range found {
					found[i] = strings.TrimSuffix(found[i], ".idx")
				}
				if len(found) > 5 {
					found = append(found[:5], "…")
				}
				return nil, fmt.Errorf("%s %s: a directory, not a dataset prefix: it holds the indexed datasets %s: pass one of them (or a blend)", flag, prefix, strings.Join(found, ", "))
			}
		}
		kind := "file"
		if st.IsDir() {
			kind = "directory"
		}
		return nil, fmt.Errorf("%s %s: a text %s, not an indexed dataset (no %s.idx): tokenize it first, gotron preprocess --input %s --output-prefix PREFIX --tokenizer-type GPT2BPETokenizer --append-eod, then pass %s PREFIX_text_document; or train on its bytes with --text-data-path %s",
			flag, prefix, kind, prefix, prefix, flag, prefix)
	}
}
