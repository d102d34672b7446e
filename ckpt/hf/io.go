package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// The files of a Hugging Face checkpoint directory.
const (
	ConfigFile  = "config.json"
	WeightsFile = "model.safetensors"
	// IndexFile lists the files of a checkpoint saved in several pieces
	// (model-00001-of-00002.safetensors, …): {"weight_map": {name: file}}.
	IndexFile = "model.safetensors.index.json"
)

// Read reads the Hugging Face checkpoint in dir: config.json and the
// weights of model.safetensors, or of the files model.safetensors.index.json
// lists.
func Read(dir string) (*Model, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("hf: %s is not a Hugging Face checkpoint: %w (it needs %s and %s)", dir, err, ConfigFile, WeightsFile)
	}
	m := &Model{}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&m.Config); err != nil {
		return nil, fmt.Errorf("hf: %s is not a JSON object of the model's settings: %w", filepath.Join(dir, ConfigFile), err)
	}
	files, err := weightFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		st, err := safetensors.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("hf: %w", err)
		}
		m.Tensors = append(m.Tensors, st.Tensors...)
	}
	return m, nil
}

// weightFiles lists the safetensors files of dir: model.safetensors, or
// the index's files in order.
func weightFiles(dir string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, WeightsFile)); err != nil {
			if _, e := os.Stat(filepath.Join(dir, "pytorch_model.bin")); e == nil {
				return nil, fmt.Errorf("hf: %s holds pytorch_model.bin (a pickle) and no %s: gotron reads safetensors only; save the model with safe_serialization=True", dir, WeightsFile)
			}
			return nil, fmt.Errorf("hf: %s has no %s: %w", dir, WeightsFile, err)
		}
		return []string{WeightsFile}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil || len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("hf: %s is not an index of safetensors files (want {\"weight_map\": {name: file}}): %v", filepath.Join(dir, IndexFile), err)
	}
	var files []string
	for _, f := range idx.WeightMap {
		if filepath.Base(f) != f || !strings.HasSuffix(f, ".safetensors") {
			return nil, fmt.Errorf("hf: %s names %q, not a safetensors file beside it", filepath.Join(dir, IndexFile), f)
		}
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return files, nil
}

// Write writes m into dir (created if need be): config.json and
// model.safetensors.
func (m *Model) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	raw, err := json.MarshalIndent(m.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("hf: config.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), m.Tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	return nil
}

// float32Number is v as the shortest decimal that reads back as the same
// float32 (1e-05, not 9.999999747378752e-06).
func float32Number(v float32) json.Number {
	return json.Number(strconv.FormatFloat(float64(v), 'g', -1, 32))
}

// reader reads config.json's values, keeping every error.
type reader struct {
	m    map[string]any
	errs []string
}

func (r *reader) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *reader) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return fmt.Errorf("hf: config.json: %s", strings.Join(r.errs, "; "))
}

// number returns key's value as a float64, def when absent or null.
func (r *reader) number(key string, def float64) float64 {
	v, ok := r.m[key]
	if !ok || v == nil {
		return def
	}
	var f float64
	var err error
	switch x := v.(type) {
	case json.Number:
		f, err = x.Float64()
	case float64:
		f = x
	case int:
		f = float64(x)
	default:
		err = fmt.Errorf("not a number")
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		r.fail("%s is %v, not a number", key, v)
		return def
	}
	return f
}

// int is the whole number key (def when absent; required when def < 0).
func (r *reader) int(key string, def int) int {
	if v, ok := r.m[key]; def < 0 && (!ok || v == nil) {
		r.fail("%s is missing", key)
		return 0
	}
	f := r.number(key, float64(def))
	if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
		r.fail("%s is %v, not a count", key, f)
		return max(def, 0)
	}
	return int(f)
}

func (r *reader) float(key string, def float64) float64 {
	f := r.number(key, def)
	if f < 0 {
		r.fail("%s is %v: it must not be negative", key, f)
	}
	return f
}

func (r *reader) bool(key string, def bool) bool {
	v, ok := r.m[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		r.fail("%s is %v, not true or false", key, v)
		return def
	}
	return b
}

func (r *reader) string(key, def string) string {
	v, ok := r.m[key]
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		r.fail("%s is %v, not a string", key, v)
		return def
	}
	return s
}

// want fails unless the boolean key is absent or has the value want.
func (r *reader) want(key string, want bool, why string) {
	if v, ok := r.m[key]; ok && v != nil && r.bool(key, want) != want {
		r.fail("%s is %v: %s", key, !want, why)
	}
}
