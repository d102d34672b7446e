package ckpt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gotron/gotron/ckpt/safetensors"
)

// ManifestFile names an iteration's manifest in a distributed checkpoint.
const ManifestFile = "metadata.json"

// Format is the manifest's format name.
const Format = "gotron-distributed-1"

// castagnoli is CRC32C's table (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Manifest describes one saved iteration of a distributed checkpoint:
// the training state, the layout that wrote it, every tensor's whole
// shape, and every shard file with its pieces and checksums.
type Manifest struct {
	Format string `json:"format"`
	// Iteration, ConsumedSamples, OptimizerSteps and SchedulerSamples
	// are as in State.
	Iteration        int   `json:"iteration"`
	ConsumedSamples  int64 `json:"consumed_train_samples"`
	OptimizerSteps   int   `json:"optimizer_steps"`
	SchedulerSamples int64 `json:"scheduler_samples,omitempty"`
	// Args are the run's settings (for the checks on resume and
	// --use-checkpoint-args): integers, and the model options that differ
	// from their defaults.
	Args Args `json:"args"`
	// Layout is the parallel layout of the run that saved.
	Layout Layout `json:"layout"`
	// GradScaler is the loss scaler's state, if any.
	GradScaler json.RawMessage `json:"grad_scaler,omitempty"`
	// Tensors maps every saved tensor's key ("model/NAME",
	// "optimizer/exp_avg/NAME", "optimizer/exp_avg_sq/NAME") to its whole
	// shape; the data are float32.
	Tensors map[string][]int `json:"tensors"`
	// Shards are the files the ranks wrote, in rank order.
	Shards []Shard `json:"shards"`
	// Ranks holds each world rank's coordinates and generator states.
	Ranks []RankState `json:"ranks"`
}

// Layout is the parallel layout of a run.
type Layout struct {
	World                int  `json:"world_size"`
	TP                   int  `json:"tensor_model_parallel_size"`
	PP                   int  `json:"pipeline_model_parallel_size"`
	VPP                  int  `json:"virtual_pipeline_model_parallel_size"`
	DP                   int  `json:"data_parallel_size"`
	CP                   int  `json:"context_parallel_size,omitempty"` // 0: 1
	DistributedOptimizer bool `json:"use_distributed_optimizer"`
	// EP and ETP are a MoE model's expert-parallel and expert
	// tensor-parallel sizes (0: a dense model). Experts are saved by global
	// index, so any EP size loads them.
	EP  int `json:"expert_model_parallel_size,omitempty"`
	ETP int `json:"expert_tensor_parallel_size,omitempty"`
}

// ContextParallel returns the layout's context-parallel size (1 when the
// manifest does not say).
func (l Layout) ContextParallel() int { return max(l.CP, 1) }

// RankState is one world rank's place in the layout and its generator
// states (the default stream, then the tracker's in name order).
type RankState struct {
	Rank int         `json:"rank"`
	TP   int         `json:"tp_rank"`
	PP   int         `json:"pp_rank"`
	DP   int         `json:"dp_rank"` // the rank in the dp×cp group
	RNG  [][4]uint64 `json:"rng_state"`
}

// Shard is one file of pieces written by one rank.
type Shard struct {
	File   string  `json:"file"`
	Rank   int     `json:"rank"`
	Size   int64   `json:"bytes"`
	Pieces []Piece `json:"pieces"`
}

// Piece is one box of one tensor, stored at Pos in its shard as float32
// little-endian values in the box's row-major order. CRC holds the CRC32C
// of each BlockSize bytes of the piece (the last block may be shorter).
type Piece struct {
	Key string `json:"key"`
	Box
	Pos int64    `json:"pos"`
	CRC []uint32 `json:"crc32c"`
}

// BlockSize is the span of one checksum: a load reads whole blocks, and
// verifies each, around the elements it needs.
const BlockSize = 1 << 20

// manifestFile is the manifest's file form: the CRC32C of the manifest's
// bytes as they stand in the file, then the manifest.
type manifestFile struct {
	Checksum string          `json:"crc32c"`
	Manifest json.RawMessage `json:"manifest"`
}

// writeManifest writes m into dir, synced.
func writeManifest(dir string, m *Manifest) error {
	body, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\"crc32c\": \"%08x\", \"manifest\": ", crc32.Checksum(body, castagnoli))
	b.Write(body)
	b.WriteString("}\n")
	return writeFileSync(filepath.Join(dir, ManifestFile), b.Bytes())
}

// readManifest reads and verifies dir's manifest.
func readManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f manifestFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v): restore it or load an earlier iteration", path, err)
	}
	if got := fmt.Sprintf("%08x", crc32.Checksum(f.Manifest, castagnoli)); got != f.Checksum {
		return nil, fmt.Errorf("%s is damaged: its checksum is %s, the file records %s: restore it or load an earlier iteration", path, got, f.Checksum)
	}
	m := &Manifest{}
	dec := json.NewDecoder(bytes.NewReader(f.Manifest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(m); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v): restore it or load an earlier iteration", path, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s is damaged: %v", path, err)
	}
	return m, nil
}

// validate checks what a manifest must satisfy to be read safely: a known
// format, sane state, tensors with non-negative shapes, pieces that lie
// within their tensors and shards, checksums for every block, no two
// pieces of a tensor sharing an element, and every element of every
// tensor saved.
func (m *Manifest) validate() error {
	if m.Format != Format {
		return fmt.Errorf("format %q, want %q", m.Format, Format)
	}
	st := State{Iteration: m.Iteration, ConsumedSamples: m.ConsumedSamples, OptimizerSteps: m.OptimizerSteps, SchedulerSamples: m.SchedulerSamples}
	if err := st.validate(); err != nil {
		return err
	}
	for key, shape := range m.Tensors {
		if _, err := numel(shape); err != nil {
			return fmt.Errorf("tensor %s: %v", key, err)
		}
	}
	byKey := map[string][]Box{}
	for _, s := range m.Shards {
		if !validShardName(s.File) || s.Size < 0 {
			return fmt.Errorf("shard %q: not a shard_NNNNN.bin file name, or a negative size", s.File)
		}
		for _, p := range s.Pieces {
			whole, ok := m.Tensors[p.Key]
			if !ok {
				return fmt.Errorf("%s: piece of %s, which the manifest does not list", s.File, p.Key)
			}
			if len(p.Offset) != len(whole) || len(p.Shape) != len(whole) {
				return fmt.Errorf("%s: piece %s of %s has %d/%d dimensions, the tensor %d", s.File, p.Box, p.Key, len(p.Offset), len(p.Shape), len(whole))
			}
			for d := range whole {
				if p.Offset[d] < 0 || p.Shape[d] <= 0 || p.Offset[d] > whole[d] || p.Shape[d] > whole[d]-p.Offset[d] {
					return fmt.Errorf("%s: piece %s lies outside %s of shape %v", s.File, p.Box, p.Key, whole)
				}
			}
			n, _ := numel(p.Shape)
			bytes := 4 * n
			if p.Pos < 0 || p.Pos > s.Size || bytes > s.Size-p.Pos {
				return fmt.Errorf("%s: piece %s of %s (%d bytes at %d) lies outside the shard's %d bytes", s.File, p.Box, p.Key, bytes, p.Pos, s.Size)
			}
			if int64(len(p.CRC)) != (bytes+BlockSize-1)/BlockSize {
				return fmt.Errorf("%s: piece %s of %s has %d checksums for %d bytes", s.File, p.Box, p.Key, len(p.CRC), bytes)
			}
			byKey[p.Key] = append(byKey[p.Key], p.Box)
		}
	}
	keys := make([]string, 0, len(m.Tensors))
	for k := range m.Tensors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		boxes := byKey[key]
		if b, c, ok := overlapping(boxes); ok {
			o, _ := b.Intersect(c)
			return fmt.Errorf("tensor %s: pieces %s and %s overlap in %s", key, b, c, o)
		}
		var total int64
		for _, b := range boxes {
			n, _ := numel(b.Shape)
			total += n
		}
		if want, _ := numel(m.Tensors[key]); total != want {
			return fmt.Errorf("tensor %s: the pieces hold %d of its %d elements: the checkpoint is incomplete", key, total, want)
		}
	}
	if !slices.IsSortedFunc(m.Ranks, func(a, b RankState) int { return a.Rank - b.Rank }) {
		return fmt.Errorf("ranks out of order")
	}
	return nil
}

// overlapping returns two boxes of the list that share an element, if
// any: a sweep along the first dimension, comparing each box only with
// those still open there (near-linear for the row blocks and flat ranges
// a checkpoint holds).
func overlapping(boxes []Box) (Box, Box, bool) {
	if len(boxes) > 1 && len(boxes[0].Shape) == 0 {
		return boxes[0], boxes[1], true // two pieces of a scalar
	}
	sorted := slices.Clone(boxes)
	slices.SortFunc(sorted, func(a, b Box) int { return a.Offset[0] - b.Offset[0] })
	var open []Box
	for _, b := range sorted {
		open = slices.DeleteFunc(open, func(c Box) bool { return c.Offset[0]+c.Shape[0] <= b.Offset[0] })
		for _, c := range open {
			if disjoint(b, c) {
				continue
			}
			return c, b, true
		}
		open = append(open, b)
	}
	return Box{}, Box{}, false
}

// disjoint reports whether boxes a and b (of one tensor) share no element.
func disjoint(a, b Box) bool {
	for d := range a.Shape {
		if a.Offset[d]+a.Shape[d] <= b.Offset[d] || b.Offset[d]+b.Shape[d] <= a.Offset[d] {
			return true
		}
	}
	return false
}

// validShardName reports whether name is a shard file name ShardFile
// gives: shard_ followed by digits and .bin, nothing with a separator or
// a dot directory.
func validShardName(name string) bool {
	digits := strings.TrimSuffix(strings.TrimPrefix(name, "shard_"), ".bin")
	if len(digits) == 0 || len(digits)+len("shard_.bin") != len(name) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// numel returns the product of shape, refusing negative dimensions and
// shapes whose float32 bytes would not fit in an int, whatever the order
// of the dimensions (safetensors.ShapeSize).
func numel(shape []int) (int64, error) {
	n, _, err := safetensors.ShapeSize(shape, 4)
	if err != nil {
		return 0, fmt.Errorf("shape %v: %v", shape, err)
	}
	return n, nil
}
