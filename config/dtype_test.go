package config

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseDType(t *testing.T) {
	for in, want := range map[string]DType{
		"float32": Float32, "FP32": Float32, "float": Float32, "torch.float32": Float32, "torch.float": Float32,
		"bfloat16": BFloat16, "bf16": BFloat16, "torch.bfloat16": BFloat16,
		"float16": Float16, "fp16": Float16, "half": Float16, "torch.float16": Float16, "torch.half": Float16,
		"": DTypeNone, "none": DTypeNone, "null": DTypeNone, " Bf16 ": BFloat16,
	} {
		got, err := ParseDType(in)
		if err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"fp8", "int8", "float64", "bfloat"} {
		if _, err := ParseDType(in); err == nil {
			t.Errorf("ParseDType(%q) succeeded", in)
		}
	}
}

func TestDTypeStringRoundTrip(t *testing.T) {
	for _, d := range []DType{DTypeNone, Float32, BFloat16, Float16} {
		got, err := ParseDType(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDType(%v.String()) = %v, %v", d, got, err)
		}
	}
	if s := DType(9).String(); s != "DType(9)" {
		t.Errorf("DType(9).String() = %q", s)
	}
	if DType(9).Valid() || !Float16.Valid() {
		t.Errorf("Valid is wrong")
	}
	if _, err := DType(9).MarshalText(); err == nil {
		t.Errorf("MarshalText of an invalid dtype succeeded")
	}
	for d, want := range map[DType]int{Float32: 4, BFloat16: 2, Float16: 2, DTypeNone: 0} {
		if d.Size() != want {
			t.Errorf("%v.Size() = %d, want %d", d, d.Size(), want)
		}
	}
}

// TestConfigJSONRoundTrip checks that the configs survive JSON under the
// reference's keys, dtypes included.
func TestConfigJSONRoundTrip(t *testing.T) {
	mp := DefaultModelParallelConfig()
	mp.TensorModelParallelSize = 4
	mp.VirtualPipelineModelParallelSize = 2
	mp.PipelineDType = BFloat16
	mp.HierarchicalContextParallelSizes = []int{2, 2}
	mp.NumMicrobatchesWithPartialActivationCheckpoints = intPtr(0)
	ddp := DefaultDDPConfig()
	ddp.ParamNamePatternsForFP32LocalAccumulation = []string{"all"}
	ddp.BucketSize = 1000

	b, err := json.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	if keys["tensor_model_parallel_size"] != 4.0 || keys["pipeline_dtype"] != "bfloat16" || keys["params_dtype"] != "float32" {
		t.Errorf("JSON keys: %s", b)
	}
	var mp2 ModelParallelConfig
	if err := json.Unmarshal(b, &mp2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(mp, mp2) {
		t.Errorf("ModelParallelConfig JSON round trip:\n got %+v\nwant %+v", mp2, mp)
	}

	b, err = json.Marshal(ddp)
	if err != nil {
		t.Fatal(err)
	}
	var ddp2 DDPConfig
	if err := json.Unmarshal(b, &ddp2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ddp, ddp2) {
		t.Errorf("DDPConfig JSON round trip:\n got %+v\nwant %+v", ddp2, ddp)
	}

	// A reference-style document with torch dtype names.
	var mp3 ModelParallelConfig
	if err := json.Unmarshal([]byte(`{"params_dtype": "torch.bfloat16", "pipeline_dtype": "bf16"}`), &mp3); err != nil {
		t.Fatal(err)
	}
	if mp3.ParamsDType != BFloat16 || mp3.PipelineDType != BFloat16 {
		t.Errorf("dtypes from JSON: %v, %v", mp3.ParamsDType, mp3.PipelineDType)
	}
	if err := json.Unmarshal([]byte(`{"params_dtype": "fp8"}`), &mp3); err == nil {
		t.Errorf("unknown dtype in JSON accepted")
	}
}
