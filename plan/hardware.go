package plan

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
)

// Hardware describes the devices and links a plan runs on: each device's
// peak arithmetic and memory, how many share a node, the bandwidth of the
// links inside a node and between nodes, and the efficiency parameters
// that turn peaks into the time of real kernels. The descriptions shipped
// with gotron are in plan/hardware/*.json (ShippedHardware); docs/PLAN.md
// says where each number comes from and which were fitted.
type Hardware struct {
	// Name names the description ("a100-80gb").
	Name string `json:"name"`
	// Description is a line on what it describes and where its numbers
	// come from.
	Description string `json:"description"`
	// PeakTFLOPS is a device's dense peak, in 10¹² FLOP/s, for GEMMs whose
	// inputs are "bf16", "fp16" or "fp32".
	PeakTFLOPS map[string]float64 `json:"peak_tflops"`
	// MemoryGiB is a device's memory, in GiB (2³⁰ bytes).
	MemoryGiB float64 `json:"memory_gib"`
	// MemoryBandwidthGBs is a device's memory bandwidth, in GB/s (10⁹
	// bytes a second).
	MemoryBandwidthGBs float64 `json:"memory_bandwidth_gbs"`
	// DevicesPerNode is how many devices share a node's fast links.
	DevicesPerNode int `json:"devices_per_node"`
	// IntraNode and InterNode are the links between devices of one node
	// and of different nodes.
	IntraNode Link `json:"intra_node"`
	InterNode Link `json:"inter_node"`
	// ActivationBytes, when set, is the bytes of an activation element
	// whatever the precision (4 for gotron on CPUs, which keeps float32
	// activations); 0: 2 in bf16 and fp16, 4 in float32.
	ActivationBytes float64 `json:"activation_bytes,omitempty"`
	// Efficiency turns the peaks into kernel times.
	Efficiency Efficiency `json:"efficiency"`
	// Caveat, when set, is printed with every plan on this hardware:
	// what its numbers have not been checked against.
	Caveat string `json:"caveat,omitempty"`
}

// Link is what a collective sees of a kind of link.
type Link struct {
	// BusBandwidthGBs is a ring collective's bus bandwidth per device, in
	// GB/s: NCCL's busbw, the rate at which each device moves its share
	// (an all-reduce of S bytes over n devices takes 2(n−1)/n·S/busbw).
	BusBandwidthGBs float64 `json:"bus_bandwidth_gbs"`
	// LatencyUS is each step of a ring (and a point-to-point message)'s
	// fixed cost, in microseconds.
	LatencyUS float64 `json:"latency_us"`
}

// Efficiency are the fractions of the peaks real kernels reach.
type Efficiency struct {
	// GEMM is the fraction of the peak a large GEMM reaches; GEMMHalfDim
	// the smallest dimension (of M, N, K) at which it reaches half of that:
	// a GEMM whose smallest dimension is d runs at GEMM·d/(d + GEMMHalfDim)
	// of the peak.
	GEMM        float64 `json:"gemm"`
	GEMMHalfDim float64 `json:"gemm_half_dim"`
	// Memory is the fraction of the memory bandwidth the element-wise
	// kernels (norms, activations, dropout, softmax, the loss, the
	// optimizer) reach.
	Memory float64 `json:"memory"`
	// Collective is the fraction of a link's bus bandwidth a collective
	// reaches while kernels compute beside it.
	Collective float64 `json:"collective"`
}

//go:embed hardware/*.json
var shipped embed.FS

// ShippedHardware returns the names of the descriptions shipped with
// gotron, sorted.
func ShippedHardware() []string {
	ents, _ := fs.ReadDir(shipped, "hardware")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	slices.Sort(names)
	return names
}

// LoadHardware returns the description named name (ShippedHardware), or,
// when name is a file's path (it holds a path separator or ends in
// .json), the description that file holds.
func LoadHardware(name string) (Hardware, error) {
	if strings.ContainsRune(name, os.PathSeparator) || strings.HasSuffix(name, ".json") {
		b, err := os.ReadFile(name)
		if err != nil {
			return Hardware{}, fmt.Errorf("--hardware %s: %w", name, err)
		}
		return ParseHardware(b, name)
	}
	b, err := shipped.ReadFile(path.Join("hardware", strings.ToLower(name)+".json"))
	if err != nil {
		return Hardware{}, fmt.Errorf("--hardware %s: no such description: choose one of %s, or give a file's path", name, strings.Join(ShippedHardware(), ", "))
	}
	return ParseHardware(b, name)
}

// ParseHardware decodes and checks a description; source names it in
// errors. Unknown fields are refused, so that a misspelt one cannot
// silently keep its zero value.
func ParseHardware(b []byte, source string) (Hardware, error) {
	var h Hardware
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return Hardware{}, fmt.Errorf("hardware description %s: %w", source, decodeError(err, b))
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return Hardware{}, fmt.Errorf("hardware description %s: byte %d: text after the description's object", source, dec.InputOffset())
	}
	if err := h.check(); err != nil {
		return Hardware{}, fmt.Errorf("hardware description %s: %w", source, err)
	}
	return h, nil
}

// decodeError places a decoding error of the description b: the line and
// column of a syntax error, or of the end of a value of the wrong type;
// the end of a description cut short; an empty one.
func decodeError(err error, b []byte) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn): // the offsets are of the byte after the one at fault
		return fmt.Errorf("%s: %w", place(b, syn.Offset-1), err)
	case errors.As(err, &typ):
		return fmt.Errorf("the value ending at %s: %w", place(b, typ.Offset-1), err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the description ends at %s before its object closes: the file is cut short", place(b, int64(len(b))-1))
	case errors.Is(err, io.EOF):
		return errors.New("the file is empty: give a JSON object, as gotron plan --calibrate FILE writes")
	}
	return err
}

// place names the line and column (from 1) of the byte at offset off of
// b.
func place(b []byte, off int64) string {
	off = min(max(off, 0), int64(len(b)))
	before := b[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Sprintf("line %d, column %d", line, col)
}

// check refuses a description whose numbers cannot give a time: every
// rate and size in [10⁻⁶, 10⁹] (in its unit), every fraction in (0, 1],
// the latencies and the GEMM's half-efficiency dimension in [0, 10⁹].
func (h Hardware) check() error {
	var errs []error
	positive := func(name string, v float64) {
		switch {
		case v == 0:
			errs = append(errs, fmt.Errorf("%s is missing or 0: give a positive number", name))
		case !(v >= 1e-6 && v <= 1e9):
			errs = append(errs, fmt.Errorf("%s is %g: it must be a positive number from 1e-6 to 1e9", name, v))
		}
	}
	fraction := func(name string, v float64) {
		if v == 0 {
			errs = append(errs, fmt.Errorf("%s is missing or 0: give a fraction in (0, 1]", name))
		} else if !(v > 0 && v <= 1) {
			errs = append(errs, fmt.Errorf("%s is %g: it must be in (0, 1]", name, v))
		}
	}
	if strings.TrimSpace(h.Name) == "" {
		errs = append(errs, errors.New(`name is missing: give the description a name, which the plan prints ("name": "my-cluster")`))
	}
	if len(h.PeakTFLOPS) == 0 {
		errs = append(errs, errors.New(`peak_tflops is empty: give at least "bf16"`))
	}
	for _, k := range slices.Sorted(maps.Keys(h.PeakTFLOPS)) {
		if k != "bf16" && k != "fp16" && k != "fp32" {
			errs = append(errs, fmt.Errorf("peak_tflops has %q: the types are bf16, fp16 and fp32", k))
		}
		positive("peak_tflops."+k, h.PeakTFLOPS[k])
	}
	positive("memory_gib", h.MemoryGiB)
	positive("memory_bandwidth_gbs", h.MemoryBandwidthGBs)
	positive("devices_per_node", float64(h.DevicesPerNode))
	positive("intra_node.bus_bandwidth_gbs", h.IntraNode.BusBandwidthGBs)
	positive("inter_node.bus_bandwidth_gbs", h.InterNode.BusBandwidthGBs)
	for name, v := range map[string]float64{"intra_node.latency_us": h.IntraNode.LatencyUS, "inter_node.latency_us": h.InterNode.LatencyUS, "efficiency.gemm_half_dim": h.Efficiency.GEMMHalfDim} {
		if !(v >= 0 && v <= 1e9) {
			errs = append(errs, fmt.Errorf("%s is %g: it must be a number from 0 to 1e9", name, v))
		}
	}
	if b := h.ActivationBytes; b != 0 && b != 1 && b != 2 && b != 4 {
		errs = append(errs, fmt.Errorf("activation_bytes is %g: it must be 1, 2 or 4 (or absent)", b))
	}
	fraction("efficiency.gemm", h.Efficiency.GEMM)
	fraction("efficiency.memory", h.Efficiency.Memory)
	fraction("efficiency.collective", h.Efficiency.Collective)
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// peak is a device's peak FLOP/s for GEMMs in dtype ("bf16", "fp16",
// "fp32"), falling back to bf16's for a 16-bit type the description
// leaves out.
func (h Hardware) peak(dtype string) (float64, error) {
	if v, ok := h.PeakTFLOPS[dtype]; ok {
		return v * 1e12, nil
	}
	if v, ok := h.PeakTFLOPS["bf16"]; ok && dtype == "fp16" {
		return v * 1e12, nil
	}
	return 0, fmt.Errorf("hardware %s has no %s peak (peak_tflops): add it, or plan the run in another precision", h.Name, dtype)
}
