package plan

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestShippedHardware: every shipped description loads, checked, under
// its file's name.
func TestShippedHardware(t *testing.T) {
	names := ShippedHardware()
	if len(names) < 2 {
		t.Fatalf("shipped descriptions %v: want at least a100-80gb and h100-80gb", names)
	}
	for _, n := range names {
		h, err := LoadHardware(n)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != n {
			t.Errorf("%s.json names itself %q", n, h.Name)
		}
	}
}

// TestLoadHardwareErrors: an unknown name lists the shipped ones; a file
// with a misspelt field, a zero rate or a fraction above one is refused
// naming the field; a file cut short, an empty one and a mistyped value
// are placed.
func TestLoadHardwareErrors(t *testing.T) {
	if _, err := LoadHardware("v100"); err == nil || !strings.Contains(err.Error(), "a100-80gb") {
		t.Errorf("unknown name: %v; want the shipped names listed", err)
	}
	dir := t.TempDir()
	good, err := shipped.ReadFile("hardware/a100-80gb.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"memory_gib": 80`, `"memory_gb": 80`, `unknown field "memory_gb"`},
		{`"bus_bandwidth_gbs": 230`, `"bus_bandwidth_gbs": 0`, "intra_node.bus_bandwidth_gbs is missing or 0"},
		{`"gemm": 0.8`, `"gemm": 1.5`, "efficiency.gemm is 1.5"},
		{`"bf16": 312`, `"bf17": 312`, `peak_tflops has "bf17"`},
		{`"devices_per_node": 8`, `"devices_per_node": -8`, "devices_per_node is -8"},
		{`"name": "a100-80gb"`, `"name": " "`, "name is missing"},
	} {
		p := filepath.Join(dir, "hw.json")
		if err := os.WriteFile(p, []byte(strings.Replace(string(good), c.from, c.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadHardware(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %q", c.to, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"cut short", []byte("{\n  \"name\": \"x\",\n  \"memory_gib\": 8"), "the description ends at line 3, column 17 before its object closes"},
		{"empty", nil, "the file is empty"},
		{"a string for a number", []byte("{\n  \"name\": \"x\",\n  \"memory_gib\": \"80\"\n}"), "the value ending at line 3, column 20"},
		{"a syntax error", []byte("{\n  \"name\": \"x\",,\n}"), "line 2, column 15: invalid character ','"},
	} {
		if _, err := ParseHardware(c.b, "hw.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := LoadHardware(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file was accepted")
	}
	h, err := LoadHardware(filepath.Join(dir, "hw.json"))
	if err == nil {
		t.Errorf("the last broken file loaded: %+v", h)
	}
}

// FuzzParseHardware: any bytes give a checked description or an error,
// never a panic; what is accepted has positive, finite rates.
func FuzzParseHardware(f *testing.F) {
	for _, n := range ShippedHardware() {
		b, _ := shipped.ReadFile("hardware/" + n + ".json")
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHardware(b, "fuzz")
		if err != nil {
			return
		}
		if err := h.check(); err != nil {
			t.Fatalf("accepted a description its check refuses: %v", err)
		}
		d := device{hw: h, peak: 1e12, elem: 2}
		if v := d.gemm(64, 64, 64) + d.memory(1e6) + d.allReduce(1e6, 4, h.InterNode); !(v > 0) || v > 1e300 {
			t.Fatalf("an accepted description gives a time of %g", v)
		}
	})
}

// TestCalibrate: this machine measured is a description the planner
// accepts, a device a core, with float32 activations.
func TestCalibrate(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the machine for a few seconds")
	}
	hw, err := Calibrate(context.Background(), "here")
	if err != nil {
		t.Fatal(err)
	}
	if err := hw.check(); err != nil {
		t.Fatal(err)
	}
	if hw.DevicesPerNode != runtime.NumCPU() || hw.ActivationBytes != 4 || hw.PeakTFLOPS["fp32"] <= 0 || hw.MemoryBandwidthGBs <= 0 {
		t.Errorf("calibrated %+v", hw)
	}
	if _, err := ParseHardware(mustJSON(t, hw), "here"); err != nil {
		t.Errorf("the calibrated description does not read back: %v", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFitGemm: rates drawn from rate = P·d/(d + d½) give P and d½ back.
func TestFitGemm(t *testing.T) {
	for _, c := range []struct{ p, h float64 }{{200, 0}, {200, 32}, {450, 100}, {1000, 640}} {
		rate := func(d float64) float64 { return c.p * d / (d + c.h) }
		p, h := fitGemm(rate(512), 512, rate(64), 64)
		if math.Abs(p-c.p) > 1e-9*c.p || math.Abs(h-c.h) > 1e-9*max(c.h, 1) {
			t.Errorf("P %g, d½ %g: fitted %g, %g", c.p, c.h, p, h)
		}
	}
	if _, h := fitGemm(100, 512, 10, 64); h != 1e6 {
		t.Errorf("a small GEMM slower than any d½ explains: d½ %g, want 1e6", h)
	}
}
