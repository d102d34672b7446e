package preprocess

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/indexed"
	"github.com/gotron/gotron/data/tokenizer"
)

// Options configure a run.
type Options struct {
	// Inputs are the files and directories to read (--input).
	Inputs []string
	// Extensions, when not empty, keep only directory files with these extensions
	// (".go" or "go"); files named directly are always read.
	Extensions []string
	// JSONKeys are the keys read from each JSON line (--json-keys; default "text").
	JSONKeys []string
	// OutputPrefix is where the datasets go: PREFIX_KEY_document.{bin,idx}.
	OutputPrefix string
	// Tokenizer encodes the text.
	Tokenizer tokenizer.Tokenizer
	// AppendEOD appends the end-of-document id to every non-empty document.
	AppendEOD bool
	// Workers is the number of tokenizing goroutines (at least 1).
	Workers int
	// SkipBadLines skips (and counts) JSON lines that cannot be read instead of failing.
	SkipBadLines bool
	// Progress, when not nil, receives a progress line redrawn in place (a terminal).
	Progress io.Writer
	// Log, when not nil, receives a progress line every LogInterval documents (not a
	// terminal; --log-interval).
	Log         io.Writer
	LogInterval int
}

// Result says what a run did.
type Result struct {
	Files     int   // input files read
	Documents int64 // documents written (per key)
	Bytes     int64 // input bytes read
	Tokens    int64 // tokens written, over every key
	// BadLines counts the JSON lines skipped with SkipBadLines; Binary the files skipped
	// because they contain a NUL byte; BlankLines the blank lines of JSON files.
	BadLines, Binary, BlankLines int64
	Elapsed                      time.Duration
	// Outputs are the datasets written, by prefix (PREFIX_KEY_document).
	Outputs []string
}

// MBPerSecond returns the input read per second, in MB (10^6 bytes).
func (r Result) MBPerSecond() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// TokensPerSecond returns the tokens written per second.
func (r Result) TokensPerSecond() float64 { return float64(r.Tokens) / r.Elapsed.Seconds() }

// OutputPrefix returns the prefix of the dataset of key: PREFIX_KEY_document.
func OutputPrefix(prefix, key string) string { return prefix + "_" + key + "_document" }

// Run preprocesses the inputs. Every error names the input file (and line) or the flag and
// the fix; on any error or cancellation no output file is left.
func Run(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	if err := o.check(); err != nil {
		return Result{}, err
	}
	files, err := data.ListFiles("--input", o.Inputs, o.Extensions, nil)
	if err != nil {
		return Result{}, err
	}
	if len(files) == 0 {
		return Result{}, fmt.Errorf("--input %s: no file found (extensions %s): pass JSONL or text files, or directories of them", strings.Join(o.Inputs, ","), strings.Join(o.Extensions, ","))
	}
	if !isSingleText(o.JSONKeys) {
		for _, f := range files {
			if !isJSON(f.Path) {
				return Result{}, fmt.Errorf("--input %s: a plain-text file holds one document without keys, so --json-keys must be the default text (got %s): convert it to JSON lines or drop --json-keys", f.Path, strings.Join(o.JSONKeys, ","))
			}
		}
	}
	if dir := filepath.Dir(o.OutputPrefix); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return Result{}, fmt.Errorf("--output-prefix %s: cannot create its directory: %w", o.OutputPrefix, err)
		}
	}
	dt := indexed.OptimalDType(o.Tokenizer.VocabSize())
	writers := make([]*indexed.Writer, len(o.JSONKeys))
	abort := func() {
		for _, w := range writers {
			if w != nil {
				w.Abort()
			}
		}
	}
	for i, k := range o.JSONKeys {
		if writers[i], err = indexed.Create(OutputPrefix(o.OutputPrefix, k), dt); err != nil {
			abort()
			return Result{}, fmt.Errorf("--output-prefix %s: %w", o.OutputPrefix, err)
		}
	}
	res, err := o.pipeline(ctx, files, writers)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		abort()
		return Result{}, err
	}
	if res.Documents == 0 {
		abort()
		return Result{}, fmt.Errorf("--input: %d file(s) and no document in them (empty files, or no line with the --json-keys %s): nothing to write; give files with text", len(files), strings.Join(o.JSONKeys, ", "))
	}
	for i, w := range writers {
		if err := w.Finish(); err != nil {
			abort()
			return Result{}, fmt.Errorf("--output-prefix %s: %w", o.OutputPrefix, err)
		}
		res.Outputs = append(res.Outputs, OutputPrefix(o.OutputPrefix, o.JSONKeys[i]))
	}
	res.Files = len(files)
	res.Elapsed = time.Since(start)
	return res, nil
}

// check validates the options.
func (o *Options) check() error {
	switch {
	case len(o.Inputs) == 0:
		return errors.New("--input is required: pass JSONL or text files, or directories of them")
	case o.OutputPrefix == "":
		return errors.New("--output-prefix is required: the datasets are written to PREFIX_KEY_document.{bin,idx}")
	case o.Tokenizer == nil:
		return errors.New("--tokenizer-type is required")
	case o.LogInterval < 0:
		return fmt.Errorf("--log-interval %d: must not be negative", o.LogInterval)
	case o.Workers < 1:
		return fmt.Errorf("--workers %d: must be at least 1", o.Workers)
	}
	if len(o.JSONKeys) == 0 {
		o.JSONKeys = []string{"text"}
	}
	seen := map[string]bool{}
	for _, k := range o.JSONKeys {
		if k == "" || strings.ContainsAny(k, "/\x00") {
			return fmt.Errorf("--json-keys %q: a key names the output file PREFIX_KEY_document: it must be non-empty without '/'", k)
		}
		if seen[k] {
			return fmt.Errorf("--json-keys: %q is given twice", k)
		}
		seen[k] = true
	}
	return nil
}

// isSingleText reports whether keys is the default single key "text".
func isSingleText(keys []string) bool { return slices.Equal(keys, []string{"text"}) }

// isJSON reports whether a file holds JSON lines, by its extension.
func isJSON(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".json", ".ndjson":
		return true
	}
	return false
}
