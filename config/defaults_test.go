package config

import (
	"bufio"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// callbackNames maps the reference's names of the callback (and internal)
// fields, which carry no JSON key, to their Go fields.
var callbackNames = map[string]string{
	"timers":                    "Timers",
	"finalize_model_grads_func": "FinalizeModelGradsFunc",
	"grad_scale_func":           "GradScaleFunc",
	"moe_grad_scale_func":       "MoEGradScaleFunc",
	"mtp_grad_scale_func":       "MTPGradScaleFunc",
	"no_sync_func":              "NoSyncFunc",
	"grad_sync_func":            "GradSyncFunc",
	"param_sync_func":           "ParamSyncFunc",
	"_cpu_offloading_context":   "CPUOffloadingContext",
}

type megatronField struct{ class, name, def string }

// readMegatronDefaults reads testdata/megatron_defaults.txt, the field list
// and defaults of the reference's dataclasses, extracted from its source.
func readMegatronDefaults(t *testing.T) []megatronField {
	t.Helper()
	f, err := os.Open("testdata/megatron_defaults.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []megatronField
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, " ", 3)
		if len(parts) != 3 {
			t.Fatalf("bad line %q", line)
		}
		out = append(out, megatronField{parts[0], parts[1], parts[2]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// goFieldByMegatronName finds the field of struct value v whose JSON key (or
// callback mapping) is name.
func goFieldByMegatronName(v reflect.Value, name string) (reflect.StructField, reflect.Value, bool) {
	ty := v.Type()
	for i := 0; i < ty.NumField(); i++ {
		sf := ty.Field(i)
		key := strings.Split(sf.Tag.Get("json"), ",")[0]
		if key == name || (key == "-" && callbackNames[name] == sf.Name) {
			return sf, v.Field(i), true
		}
	}
	return reflect.StructField{}, reflect.Value{}, false
}

// checkPythonDefault compares a Go field value with a Python default literal.
func checkPythonDefault(t *testing.T, class, name, def string, fv reflect.Value) {
	t.Helper()
	bad := func() { t.Errorf("%s.%s: Go default %#v, reference default %s", class, name, fv.Interface(), def) }
	switch {
	case def == "None":
		if !fv.IsZero() {
			bad()
		}
	case def == "True" || def == "False":
		if fv.Kind() != reflect.Bool || fv.Bool() != (def == "True") {
			bad()
		}
	case def == "()":
		if fv.Kind() != reflect.Slice || fv.Len() != 0 {
			bad()
		}
	case strings.HasPrefix(def, "torch."):
		want, err := ParseDType(def)
		if err != nil {
			t.Fatalf("%s.%s: %v", class, name, err)
		}
		if d, ok := fv.Interface().(DType); !ok || d != want {
			bad()
		}
	case strings.HasPrefix(def, "'"):
		if fv.Kind() != reflect.String || fv.String() != strings.Trim(def, "'") {
			bad()
		}
	default:
		n, err := strconv.Atoi(def)
		if err != nil {
			t.Fatalf("%s.%s: cannot read default %q", class, name, def)
		}
		if fv.Kind() != reflect.Int || fv.Int() != int64(n) {
			bad()
		}
	}
}

// TestDefaultsMatchMegatron checks, against the field list extracted from the
// reference's source, that every reference field has a Go field, that no Go
// field is extra, and that the default constructors give the reference's
// defaults (None as the zero value).
func TestDefaultsMatchMegatron(t *testing.T) {
	structs := map[string]reflect.Value{
		"ModelParallelConfig":           reflect.ValueOf(DefaultModelParallelConfig()),
		"DistributedDataParallelConfig": reflect.ValueOf(DefaultDDPConfig()),
	}
	seen := map[string]int{}
	for _, mf := range readMegatronDefaults(t) {
		v, ok := structs[mf.class]
		if !ok {
			t.Fatalf("unknown class %q", mf.class)
		}
		sf, fv, ok := goFieldByMegatronName(v, mf.name)
		if !ok {
			t.Errorf("%s.%s has no Go field", mf.class, mf.name)
			continue
		}
		seen[mf.class]++
		if sf.Type.Kind() == reflect.Func {
			if mf.def != "None" || !fv.IsNil() {
				t.Errorf("%s.%s: callback default must be nil", mf.class, mf.name)
			}
			continue
		}
		checkPythonDefault(t, mf.class, mf.name, mf.def, fv)
	}
	for class, v := range structs {
		if n := v.NumField(); n != seen[class] {
			t.Errorf("%s: Go struct has %d fields, the reference %d", class, n, seen[class])
		}
	}
}

func TestDefaultsAreValid(t *testing.T) {
	mp := DefaultModelParallelConfig()
	ddp := DefaultDDPConfig()
	if err := mp.Validate(); err != nil {
		t.Errorf("DefaultModelParallelConfig: %v", err)
	}
	if err := ddp.Validate(); err != nil {
		t.Errorf("DefaultDDPConfig: %v", err)
	}
	if err := ValidateTogether(mp, ddp, false); err != nil {
		t.Errorf("ValidateTogether(defaults): %v", err)
	}
	if err := ValidateWorld(1, mp, ddp); err != nil {
		t.Errorf("ValidateWorld(1, defaults): %v", err)
	}
	if w := mp.Warnings(); len(w) != 0 {
		t.Errorf("Warnings(defaults) = %q", w)
	}
	mp.Finalize()
	ddp.Finalize()
	if err := ValidateTogether(mp, ddp, true); err != nil {
		t.Errorf("finalized defaults: %v", err)
	}
}

func TestFinalize(t *testing.T) {
	c := DefaultModelParallelConfig()
	c.TensorModelParallelSize = 4
	c.PipelineModelParallelSize = 3
	c.ParamsDType = BFloat16
	c.TensorParallelNumWeightShards = 4
	c.ExpertTensorParallelNumWeightShards = 4
	c.Finalize()
	if c.ExpertTensorParallelSize != 4 {
		t.Errorf("expert_tensor_parallel_size = %d, want tp = 4", c.ExpertTensorParallelSize)
	}
	if c.MicrobatchGroupSizePerVPStage != 3 {
		t.Errorf("microbatch_group_size_per_vp_stage = %d, want pp = 3", c.MicrobatchGroupSizePerVPStage)
	}
	if c.AutocastDType != BFloat16 {
		t.Errorf("autocast_dtype = %v, want params_dtype bfloat16", c.AutocastDType)
	}
	if c.GTPWeightRematSize != 1 || c.ExpertGTPWeightRematSize != 1 {
		t.Errorf("gtp = %d, expert gtp = %d, want 4/4 = 1", c.GTPWeightRematSize, c.ExpertGTPWeightRematSize)
	}

	// Explicit values are kept, and Finalize is idempotent.
	c2 := DefaultModelParallelConfig()
	c2.TensorModelParallelSize = 4
	c2.ExpertTensorParallelSize = 2
	c2.MicrobatchGroupSizePerVPStage = 5
	c2.AutocastDType = Float16
	c2.TensorParallelNumWeightShards = 8 // gtp 8/4 = 2
	c2.Finalize()
	once := c2
	c2.Finalize()
	if !reflect.DeepEqual(once, c2) {
		t.Errorf("Finalize is not idempotent")
	}
	if c2.ExpertTensorParallelSize != 2 || c2.MicrobatchGroupSizePerVPStage != 5 || c2.AutocastDType != Float16 {
		t.Errorf("Finalize overwrote explicit values: %+v", c2)
	}
	if c2.GTPWeightRematSize != 2 {
		t.Errorf("gtp_weight_remat_size = %d, want 8/4 = 2", c2.GTPWeightRematSize)
	}

	d := DefaultDDPConfig()
	d.MegatronFSDPMaxPoolDoubleBuffer = true
	d.Finalize()
	if !d.FSDPDoubleBuffer {
		t.Errorf("megatron_fsdp_max_pool_double_buffer did not imply fsdp_double_buffer")
	}
}

func TestEffectiveValuesWithoutFinalize(t *testing.T) {
	c := DefaultModelParallelConfig()
	c.TensorModelParallelSize = 2
	c.PipelineModelParallelSize = 4
	if got := c.EffectiveExpertTensorParallelSize(); got != 2 {
		t.Errorf("EffectiveExpertTensorParallelSize = %d, want 2", got)
	}
	if got := c.EffectiveMicrobatchGroupSize(); got != 4 {
		t.Errorf("EffectiveMicrobatchGroupSize = %d, want 4", got)
	}
	if got := c.EffectiveAutocastDType(); got != Float32 {
		t.Errorf("EffectiveAutocastDType = %v, want float32", got)
	}
	if c.Interleaved() || c.NumModelChunks() != 1 {
		t.Errorf("unset VPP: Interleaved = %v, chunks = %d", c.Interleaved(), c.NumModelChunks())
	}
	c.VirtualPipelineModelParallelSize = 3
	if !c.Interleaved() || c.NumModelChunks() != 3 {
		t.Errorf("VPP 3: Interleaved = %v, chunks = %d", c.Interleaved(), c.NumModelChunks())
	}
}
