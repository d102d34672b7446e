package optim

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// scalerStep is one Update call of a scripted sequence, repeated times
// times (1 when zero), and the state expected after the last repetition.
type scalerStep struct {
	inf    bool
	times  int
	want   ScalerState
	reason string
}

func TestDynamicGradScalerSequences(t *testing.T) {
	// Every expected state is worked by hand from the rule in
	// DynamicGradScaler's comment (g and h are the growth and hysteresis
	// trackers):
	//   inf:   g ← 0, h ← h−1, if h ≤ 0: S ← max(S·backoff, min)
	//   clean: g ← g+1, if g = window: g ← 0, h ← hysteresis, S ← S·growth
	st := func(s float32, g, h int) ScalerState {
		return ScalerState{Scale: s, GrowthTracker: g, HysteresisTracker: h}
	}
	cases := []struct {
		name  string
		cfg   DynamicScalerConfig
		steps []scalerStep
	}{
		{
			name: "hysteresis 2, window 3, backoff clamped at min 1.5",
			cfg:  DynamicScalerConfig{InitialScale: 8, MinScale: 1.5, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, Hysteresis: 2},
			steps: []scalerStep{
				{inf: true, want: st(8, 0, 1), reason: "first inf uses up one unit of hysteresis, no backoff"},
				{inf: true, want: st(4, 0, 0), reason: "h reaches 0: 8·0.5"},
				{inf: true, want: st(2, 0, -1), reason: "h < 0: every further inf backs off"},
				{inf: true, want: st(1.5, 0, -2), reason: "2·0.5 = 1 clamped to min 1.5"},
				{inf: true, want: st(1.5, 0, -3), reason: "1.5·0.5 = 0.75 clamped to min 1.5"},
				{want: st(1.5, 1, -3)},
				{want: st(1.5, 2, -3), reason: "clean steps do not restore h"},
				{want: st(3, 0, 2), reason: "third clean step: growth, h restored"},
				{want: st(3, 1, 2)},
				{want: st(3, 2, 2)},
				{inf: true, want: st(3, 0, 1), reason: "inf one step before growth resets g"},
				{want: st(3, 1, 1)},
				{want: st(3, 2, 1), reason: "growth interrupted: the window restarts"},
				{inf: true, want: st(1.5, 0, 0), reason: "h not restored by clean steps: second inf since growth backs off"},
				{times: 2, want: st(1.5, 2, 0)},
				{want: st(3, 0, 2), reason: "exactly window clean steps grow"},
			},
		},
		{
			name: "hysteresis 1, window 2, min 256",
			cfg:  DynamicScalerConfig{InitialScale: 1024, MinScale: 256, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2, Hysteresis: 1},
			steps: []scalerStep{
				{inf: true, want: st(512, 0, 0), reason: "hysteresis 1: the first inf backs off"},
				{want: st(512, 1, 0)},
				{inf: true, want: st(256, 0, -1)},
				{inf: true, want: st(256, 0, -2), reason: "256·0.5 = 128 clamped to min 256"},
				{want: st(256, 1, -2)},
				{want: st(512, 0, 1), reason: "growth restores h = 1"},
				{inf: true, want: st(256, 0, 0)},
			},
		},
		{
			name: "window 1: every clean step grows",
			cfg:  DynamicScalerConfig{InitialScale: 1, MinScale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1, Hysteresis: 2},
			steps: []scalerStep{
				{want: st(2, 0, 2)},
				{want: st(4, 0, 2)},
				{inf: true, want: st(4, 0, 1)},
				{want: st(8, 0, 2), reason: "growth restores h"},
				{inf: true, want: st(8, 0, 1)},
				{inf: true, want: st(4, 0, 0)},
			},
		},
		{
			name: "other factors: growth 4, backoff 0.25, hysteresis 3",
			cfg:  DynamicScalerConfig{InitialScale: 64, MinScale: 2, GrowthFactor: 4, BackoffFactor: 0.25, GrowthInterval: 2, Hysteresis: 3},
			steps: []scalerStep{
				{inf: true, times: 2, want: st(64, 0, 1), reason: "two of three units of hysteresis used"},
				{inf: true, want: st(16, 0, 0)},
				{inf: true, want: st(4, 0, -1)},
				{inf: true, want: st(2, 0, -2), reason: "4·0.25 = 1 clamped to min 2"},
				{times: 2, want: st(8, 0, 3)},
			},
		},
		{
			name: "Megatron defaults: growth after exactly 1000 clean steps",
			cfg:  DefaultDynamicScalerConfig(),
			steps: []scalerStep{
				{times: 999, want: st(1<<32, 999, 2)},
				{want: st(1<<33, 0, 2)},
				{inf: true, want: st(1<<33, 0, 1)},
				{times: 999, want: st(1<<33, 999, 1)},
				{inf: true, want: st(1<<32, 0, 0), reason: "an inf at step 999 of the window backs off"},
				{times: 1000, want: st(1<<33, 0, 2)},
			},
		},
		{
			name: "a growth that would overflow float32 keeps the scale",
			cfg:  DynamicScalerConfig{InitialScale: 0x1p126, MinScale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1, Hysteresis: 1},
			steps: []scalerStep{
				{want: st(0x1p127, 0, 1)},
				{want: st(0x1p127, 0, 1), reason: "2¹²⁸ is +Inf in float32"},
				{inf: true, want: st(0x1p126, 0, 0)},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewDynamicGradScaler(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.State(), st(c.cfg.InitialScale, 0, c.cfg.Hysteresis); got != want {
				t.Fatalf("initial state %+v, want %+v", got, want)
			}
			n := 0
			for i, step := range c.steps {
				for range max(step.times, 1) {
					s.Update(step.inf)
					n++
				}
				if got := s.State(); got != step.want {
					t.Errorf("step %d (update %d, inf=%v): state %+v, want %+v (%s)", i, n, step.inf, got, step.want, step.reason)
				}
				if s.Scale() != step.want.Scale {
					t.Errorf("step %d: Scale() %g, State().Scale %g", i, s.Scale(), step.want.Scale)
				}
			}
		})
	}
}

func TestInvScale(t *testing.T) {
	for _, s := range []float32{1, 3, 1 << 32, 0x1p127, 1e-3, math.MaxFloat32} {
		want := float32(1 / float64(s))
		c, err := NewConstantGradScaler(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.InvScale(); got != want {
			t.Errorf("constant %g: InvScale %g, want %g", s, got, want)
		}
		d, err := NewDynamicGradScaler(DynamicScalerConfig{InitialScale: s, MinScale: s, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1, Hysteresis: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.InvScale(); got != want {
			t.Errorf("dynamic %g: InvScale %g, want %g", s, got, want)
		}
	}
	// 1/3 rounded once from float64 differs from float32 division only in
	// rare cases; check the one rounding against the exact quotient.
	if got := inverseOf(3); math.Abs(float64(got)-1.0/3) > 0.5*(1.0/3)*0x1p-23 {
		t.Errorf("inverseOf(3) = %g is not 1/3 correctly rounded", got)
	}
}

func TestConstantGradScaler(t *testing.T) {
	c, err := NewConstantGradScaler(4096)
	if err != nil {
		t.Fatal(err)
	}
	for i, inf := range []bool{true, true, true, false, false, true} {
		c.Update(inf)
		if c.Scale() != 4096 || c.InvScale() != 1.0/4096 {
			t.Fatalf("after update %d (inf=%v): scale %g, inverse %g; want 4096 and 1/4096", i, inf, c.Scale(), c.InvScale())
		}
	}
	if got, want := c.State(), (ScalerState{Scale: 4096}); got != want {
		t.Errorf("State %+v, want %+v", got, want)
	}
	// A checkpoint's scale does not override --loss-scale.
	if err := c.Load(ScalerState{Scale: 8, GrowthTracker: 3, HysteresisTracker: -2}); err != nil {
		t.Fatal(err)
	}
	if c.Scale() != 4096 {
		t.Errorf("Load changed the constant scale to %g", c.Scale())
	}
	if err := c.Load(ScalerState{Scale: float32(math.NaN())}); err == nil || !strings.Contains(err.Error(), "scale") {
		t.Errorf("a NaN scale loaded: %v", err)
	}
	for _, bad := range []float32{0, -1, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if _, err := NewConstantGradScaler(bad); err == nil || !strings.Contains(err.Error(), "--loss-scale") {
			t.Errorf("--loss-scale %g: error %v, want one naming --loss-scale", bad, err)
		}
	}
}

func TestDynamicScalerConfigValidate(t *testing.T) {
	if err := DefaultDynamicScalerConfig().Validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		edit func(*DynamicScalerConfig)
		flag string
	}{
		{func(c *DynamicScalerConfig) { c.InitialScale = 0 }, "--initial-loss-scale"},
		{func(c *DynamicScalerConfig) { c.InitialScale = -4 }, "--initial-loss-scale"},
		{func(c *DynamicScalerConfig) { c.InitialScale = nan }, "--initial-loss-scale"},
		{func(c *DynamicScalerConfig) { c.InitialScale = inf }, "--initial-loss-scale"},
		{func(c *DynamicScalerConfig) { c.MinScale = 0 }, "--min-loss-scale"},
		{func(c *DynamicScalerConfig) { c.MinScale = nan }, "--min-loss-scale"},
		{func(c *DynamicScalerConfig) { c.InitialScale, c.MinScale = 2, 4 }, "--min-loss-scale"},
		{func(c *DynamicScalerConfig) { c.GrowthInterval = 0 }, "--loss-scale-window"},
		{func(c *DynamicScalerConfig) { c.GrowthInterval = -1 }, "--loss-scale-window"},
		{func(c *DynamicScalerConfig) { c.Hysteresis = 0 }, "--hysteresis"},
		{func(c *DynamicScalerConfig) { c.GrowthFactor = 1 }, "growth factor"},
		{func(c *DynamicScalerConfig) { c.GrowthFactor = nan }, "growth factor"},
		{func(c *DynamicScalerConfig) { c.GrowthFactor = inf }, "growth factor"},
		{func(c *DynamicScalerConfig) { c.BackoffFactor = 1 }, "backoff factor"},
		{func(c *DynamicScalerConfig) { c.BackoffFactor = 0 }, "backoff factor"},
		{func(c *DynamicScalerConfig) { c.BackoffFactor = nan }, "backoff factor"},
	}
	for i, c := range cases {
		cfg := DefaultDynamicScalerConfig()
		c.edit(&cfg)
		s, err := NewDynamicGradScaler(cfg)
		if err == nil || s != nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("case %d %+v: scaler %v, error %v; want an error naming %s", i, cfg, s, err, c.flag)
		}
	}
	// Every violation is reported.
	err := DynamicScalerConfig{}.Validate()
	for _, flag := range []string{"--initial-loss-scale", "--min-loss-scale", "--loss-scale-window", "--hysteresis", "growth factor", "backoff factor"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("zero config: error %v does not name %s", err, flag)
		}
	}
}

func TestScalerStateRoundTrip(t *testing.T) {
	cfg := DynamicScalerConfig{InitialScale: 1 << 20, MinScale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 5, Hysteresis: 3}
	a, err := NewDynamicGradScaler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pattern := []bool{true, false, true, true, true, false, false, true}
	for _, inf := range pattern {
		a.Update(inf)
	}
	// From 2²⁰ with h = 3: h runs 2, 2, 1, 0, −1, −1, −1, −2 and g 0, 1, 0,
	// 0, 0, 1, 2, 0, so the 4th, 5th and 8th updates back off to 2¹⁷.
	want := ScalerState{Scale: 1 << 17, GrowthTracker: 0, HysteresisTracker: -2}
	if got := a.State(); got != want {
		t.Fatalf("state before saving %+v, want %+v", got, want)
	}
	blob, err := json.Marshal(a.State())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(blob); got != `{"scale":131072,"growth_tracker":0,"hysteresis_tracker":-2}` {
		t.Errorf("JSON %s", got)
	}
	var st ScalerState
	if err := json.Unmarshal(blob, &st); err != nil {
		t.Fatal(err)
	}
	b, err := NewDynamicGradScaler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Load(st); err != nil {
		t.Fatal(err)
	}
	// The resumed scaler follows the original exactly.
	for i, inf := range append(pattern, false, false, false, false, false, false) {
		a.Update(inf)
		b.Update(inf)
		if a.State() != b.State() {
			t.Fatalf("update %d after resuming: %+v, original %+v", i, b.State(), a.State())
		}
	}
	// A non-power-of-two scale survives JSON exactly (shortest float32 text).
	odd := ScalerState{Scale: math.Nextafter32(3, 4), GrowthTracker: 4, HysteresisTracker: 3}
	blob, _ = json.Marshal(odd)
	var back ScalerState
	if err := json.Unmarshal(blob, &back); err != nil || back != odd {
		t.Errorf("%+v → %s → %+v (%v)", odd, blob, back, err)
	}
}

func TestScalerLoadRejectsCorruptStates(t *testing.T) {
	cfg := DynamicScalerConfig{InitialScale: 1024, MinScale: 4, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 10, Hysteresis: 2}
	cases := []struct {
		st    ScalerState
		field string
	}{
		{ScalerState{Scale: float32(math.NaN()), HysteresisTracker: 2}, "scale"},
		{ScalerState{Scale: float32(math.Inf(1)), HysteresisTracker: 2}, "scale"},
		{ScalerState{Scale: float32(math.Inf(-1)), HysteresisTracker: 2}, "scale"},
		{ScalerState{Scale: 0, HysteresisTracker: 2}, "scale"},
		{ScalerState{Scale: -8, HysteresisTracker: 2}, "scale"},
		{ScalerState{Scale: 2, HysteresisTracker: 2}, "--min-loss-scale"},
		{ScalerState{Scale: 64, GrowthTracker: -1, HysteresisTracker: 2}, "growth_tracker"},
		{ScalerState{Scale: 64, GrowthTracker: 10, HysteresisTracker: 2}, "growth_tracker"},
		{ScalerState{Scale: 64, GrowthTracker: math.MaxInt, HysteresisTracker: 2}, "growth_tracker"},
		{ScalerState{Scale: 64, HysteresisTracker: 3}, "hysteresis_tracker"},
		{ScalerState{}, "scale"}, // a zero state: no scaler in the checkpoint
	}
	for _, c := range cases {
		s, err := NewDynamicGradScaler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s.Update(true)
		before := s.State()
		err = s.Load(c.st)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Load(%+v): error %v, want one naming %s", c.st, err, c.field)
		}
		if s.State() != before {
			t.Errorf("a rejected Load(%+v) changed the state to %+v", c.st, s.State())
		}
	}
	// Every fault is named at once.
	err := (&DynamicGradScaler{DynamicScalerConfig: cfg}).Load(ScalerState{Scale: float32(math.NaN()), GrowthTracker: -3, HysteresisTracker: 7})
	for _, field := range []string{"scale", "growth_tracker", "hysteresis_tracker"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("error %v does not name %s", err, field)
		}
	}
	// The edges of the invariants load.
	for _, ok := range []ScalerState{
		{Scale: 4, GrowthTracker: 0, HysteresisTracker: 2},
		{Scale: math.MaxFloat32, GrowthTracker: 9, HysteresisTracker: math.MinInt},
	} {
		s, _ := NewDynamicGradScaler(cfg)
		if err := s.Load(ok); err != nil || s.State() != ok {
			t.Errorf("Load(%+v): %v, state %+v", ok, err, s.State())
		}
	}
}

func TestHysteresisTrackerSaturates(t *testing.T) {
	s, err := NewDynamicGradScaler(DynamicScalerConfig{InitialScale: 8, MinScale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 4, Hysteresis: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ScalerState{Scale: 2, HysteresisTracker: math.MinInt + 1}); err != nil {
		t.Fatal(err)
	}
	s.Update(true)
	s.Update(true)
	if got, want := s.State(), (ScalerState{Scale: 1, HysteresisTracker: math.MinInt}); got != want {
		t.Errorf("state %+v, want %+v", got, want)
	}
}

// f32frombits builds a float32 from its bit pattern.
func f32frombits(b uint32) float32 { return math.Float32frombits(b) }

func TestUnscaleAndCheck(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name  string
		grads [][]float32
		inv   float32
		want  bool
	}{
		{"nil", nil, 0.5, false},
		{"empty slices", [][]float32{{}, nil, {}}, 0.5, false},
		{"finite", [][]float32{{1, -2, 3}, {4}}, 0.5, false},
		{"large finite", [][]float32{{math.MaxFloat32, -math.MaxFloat32, f32frombits(0x7f7fffff), f32frombits(0xff7fffff)}}, 0x1p-32, false},
		{"large finite, inverse 1", [][]float32{{math.MaxFloat32, -math.MaxFloat32}}, 1, false},
		{"tiny and subnormal", [][]float32{{f32frombits(1), f32frombits(0x807fffff), 0, float32(math.Copysign(0, -1))}}, 0.25, false},
		{"NaN", [][]float32{{1, 2}, {3, nan, 5}}, 0.5, true},
		{"negative NaN", [][]float32{{f32frombits(0xffc00000)}}, 0.5, true},
		{"signalling NaN", [][]float32{{1, f32frombits(0x7f800001)}}, 0.5, true},
		{"+Inf", [][]float32{{1, 2, 3, 4, 5, 6, 7, 8, 9, inf}}, 0.5, true},
		{"−Inf", [][]float32{{-inf}, {1}}, 0.5, true},
		{"Inf in an empty-led list", [][]float32{{}, {inf}}, 1, true},
		{"unscaling overflows", [][]float32{{math.MaxFloat32}}, 2, true},
	}
	for _, c := range cases {
		want := make([][]float32, len(c.grads))
		for i, g := range c.grads {
			for _, v := range g {
				want[i] = append(want[i], v*c.inv)
			}
		}
		if got := UnscaleAndCheck(c.grads, c.inv); got != c.want {
			t.Errorf("%s: found %v, want %v", c.name, got, c.want)
		}
		for i, g := range c.grads {
			for j, v := range g {
				if w := want[i][j]; math.Float32bits(v) != math.Float32bits(w) && !(v != v && w != w) {
					t.Errorf("%s: grads[%d][%d] = %g, want %g", c.name, i, j, v, w)
				}
			}
		}
	}
}

func TestUnscaleAndCheckEveryPosition(t *testing.T) {
	// A non-finite value at each position of slices of each length and
	// offset (so each alignment, the unrolled body and the tails), and a
	// scan that keeps scaling after the find.
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), f32frombits(0xffffffff)}
	backing := make([]float32, 8200)
	for _, n := range []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 4095, 8193} {
		for off := range 2 {
			x := backing[off : off+n]
			positions := []int{0, n / 2, n - 1}
			if n <= 33 {
				positions = positions[:0]
				for p := range n {
					positions = append(positions, p)
				}
			}
			for _, p := range positions {
				for _, sp := range specials {
					for i := range x {
						x[i] = float32(i%13) - 6
					}
					x[p] = sp
					if !UnscaleAndCheck([][]float32{{1}, x, {2}}, 0.5) {
						t.Fatalf("n=%d offset=%d: %v at %d not found", n, off, sp, p)
					}
					for i, v := range x {
						if i != p && v != (float32(i%13)-6)*0.5 {
							t.Fatalf("n=%d offset=%d: x[%d] = %g not unscaled", n, off, i, v)
						}
					}
				}
			}
			for i := range x {
				x[i] = math.MaxFloat32
			}
			if UnscaleAndCheck([][]float32{x}, 1) {
				t.Fatalf("n=%d offset=%d: all-MaxFloat32 reported non-finite", n, off)
			}
		}
	}
}

func TestAnyNonFiniteMatchesMath(t *testing.T) {
	// Every exponent with assorted mantissas and signs against math.IsNaN/IsInf.
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 1, 0x400000, 0x7fffff, 0x123456} {
			for _, sign := range []uint32{0, 1 << 31} {
				v := f32frombits(sign | e<<23 | m)
				want := math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)
				for _, x := range [][]float32{{v}, {1, v}, {1, 2, 3, 4, 5, 6, 7, 8, v}} {
					if got := anyNonFinite(x); got != want {
						t.Fatalf("%#08x in %d values: %v, want %v", math.Float32bits(v), len(x), got, want)
					}
				}
			}
		}
	}
}

// FuzzScalerLoad loads arbitrary states into a dynamic scaler: Load must
// accept exactly the states inside Update's invariants, leave the scaler
// unchanged when it refuses, and the updates that follow an accepted load
// must stay inside them (so their states load again).
func FuzzScalerLoad(f *testing.F) {
	f.Add(float32(1024), 0, 2, []byte{0, 1, 1, 0})
	f.Add(float32(1), 9, -5, []byte{1, 1, 1})
	f.Add(float32(4), 0, 2, []byte{})
	f.Add(float32(math.MaxFloat32), 9, 1, []byte{0, 0})
	f.Add(float32(math.NaN()), 0, 2, []byte{1})
	f.Add(float32(math.Inf(1)), 0, 2, []byte{0})
	f.Add(float32(math.Inf(-1)), 0, 2, []byte{0})
	f.Add(float32(0), 0, 0, []byte{})
	f.Add(float32(-3), 1, 1, []byte{1})
	f.Add(float32(2), 0, 2, []byte{1})
	f.Add(float32(64), 10, 2, []byte{0})
	f.Add(float32(64), -1, 2, []byte{0})
	f.Add(float32(64), 3, 3, []byte{0})
	f.Add(float32(64), 3, math.MinInt, []byte{1, 1})
	f.Add(float32(64), math.MaxInt, math.MaxInt, []byte{})
	f.Add(f32frombits(1), 0, 0, []byte{1})
	cfg := DynamicScalerConfig{InitialScale: 1024, MinScale: 4, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 10, Hysteresis: 2}
	inside := func(st ScalerState) bool {
		return st.Scale >= cfg.MinScale && !math.IsInf(float64(st.Scale), 0) &&
			st.GrowthTracker >= 0 && st.GrowthTracker < cfg.GrowthInterval &&
			st.HysteresisTracker <= cfg.Hysteresis
	}
	f.Fuzz(func(t *testing.T, scale float32, growth, hyst int, updates []byte) {
		s, err := NewDynamicGradScaler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := s.State()
		st := ScalerState{Scale: scale, GrowthTracker: growth, HysteresisTracker: hyst}
		err = s.Load(st)
		if ok := inside(st); ok != (err == nil) {
			t.Fatalf("Load(%+v): error %v, but inside the invariants: %v", st, err, ok)
		}
		if err != nil {
			if s.State() != before {
				t.Fatalf("rejected Load(%+v) changed the state to %+v", st, s.State())
			}
			return
		}
		if s.State() != st {
			t.Fatalf("Load(%+v) gave %+v", st, s.State())
		}
		for i, u := range updates {
			s.Update(u&1 == 1)
			got := s.State()
			if !inside(got) {
				t.Fatalf("update %d from %+v left the invariants: %+v", i, st, got)
			}
			blob, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("state %+v does not encode: %v", got, err)
			}
			var back ScalerState
			if err := json.Unmarshal(blob, &back); err != nil || back != got {
				t.Fatalf("%+v → %s → %+v (%v)", got, blob, back, err)
			}
			r, _ := NewDynamicGradScaler(cfg)
			if err := r.Load(back); err != nil {
				t.Fatalf("state %+v reached by Update does not load: %v", got, err)
			}
		}
	})
}

func BenchmarkUnscaleAndCheck(b *testing.B) {
	for _, n := range []int{1 << 14, 1 << 22} {
		g := make([]float32, n)
		for i := range g {
			g[i] = float32(i%1000) * 1e-3
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				if UnscaleAndCheck([][]float32{g}, 1) {
					b.Fatal("non-finite gradient")
				}
			}
		})
		b.Run(fmt.Sprint(n, "/unscale"), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for i := 0; b.Loop(); i++ {
				if UnscaleAndCheck([][]float32{g}, []float32{2, 0.5}[i%2]) { // ×2 then ×½: the values stay finite
					b.Fatal("non-finite gradient")
				}
			}
		})
	}
}

// One fp16 iteration with a dynamic scaler; the gradient of the scaled
// loss overflowed, so the step is skipped.
func ExampleDynamicGradScaler() {
	s, err := NewDynamicGradScaler(DynamicScalerConfig{InitialScale: 65536, MinScale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000, Hysteresis: 1})
	if err != nil {
		panic(err)
	}
	grads := [][]float32{{65536, float32(math.Inf(1))}, {-32768}}
	found := UnscaleAndCheck(grads, s.InvScale())
	// found would be all-reduced (MAX) over the ranks holding gradients here.
	s.Update(found)
	fmt.Println(found, grads, s.Scale())
	// Output: true [[1 +Inf] [-0.5]] 32768
}
