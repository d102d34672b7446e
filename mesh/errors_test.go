package mesh

import (
	"reflect"
	"strings"
	"testing"
)

// Every bad size is an error whose message shows the arithmetic and a fix.
func TestBuildErrors(t *testing.T) {
	cases := []struct {
		name string
		s    Sizes
		want []string
	}{
		{"dense grid does not divide", Sizes{World: 6, TP: 2, PP: 2},
			[]string{"world size 6 is not divisible by tp·pp·cp = 2·2·1 = 4", "multiple of 4"}},
		{"dense grid with cp", Sizes{World: 16, TP: 2, CP: 3},
			[]string{"world size 16 is not divisible by tp·pp·cp = 2·1·3 = 6"}},
		{"expert grid does not divide", Sizes{World: 12, EP: 8},
			[]string{"world size 12 is not divisible by etp·ep·pp = 1·8·1 = 8", "multiple of 8"}},
		{"etp does not divide", Sizes{World: 8, TP: 2, ETP: 3},
			[]string{"etp·ep·pp = 3·1·1 = 3"}},
		{"both grids", Sizes{World: 10, TP: 4, EP: 3, ETP: 1},
			[]string{"tp·pp·cp = 4·1·1 = 4", "etp·ep·pp = 1·3·1 = 3"}},
		{"negative", Sizes{World: 8, TP: -1, EP: -2},
			[]string{"TP = -1 is negative", "EP = -2 is negative"}},
		{"negative etp", Sizes{World: 8, ETP: -1}, []string{"ETP = -1 is negative", "0 means the same as TP"}},
		{"no world", Sizes{TP: 2}, []string{"World = 0", "number of ranks"}},
		{"instances and dp·cp", Sizes{World: 8, TP: 2, NumDistOptInstances: 3},
			[]string{"dp·cp = 4·1 = 4 is not divisible by NumDistOptInstances = 3", "gcd(dp·cp, edp) = gcd(4, 4) = 4"}},
		{"instances and edp", Sizes{World: 8, EP: 4, NumDistOptInstances: 4},
			[]string{"edp = world/(etp·ep·pp) = 8/(1·4·1) = 2 is not divisible by NumDistOptInstances = 4", "gcd(dp·cp, edp) = gcd(8, 2) = 2"}},
		{"cp left out of the order", Sizes{World: 8, TP: 2, CP: 2, Order: "tp-ep-dp-pp"},
			[]string{`dense grid (tp, cp, dp, pp): the size of cp is 2, but the order "tp-ep-dp-pp" does not name cp`}},
		{"ep left out of the order", Sizes{World: 8, EP: 2, Order: "tp-cp-dp-pp"},
			[]string{`expert grid (etp, ep, edp, pp): the size of ep is 2, but the order "tp-cp-dp-pp" does not name ep`}},
		{"etp left out of the order", Sizes{World: 8, ETP: 2, Order: "cp-ep-dp-pp"},
			[]string{"expert grid", "the size of tp (the expert tensor-parallel size ETP) is 2"}},
		{"unknown name", Sizes{World: 8, Order: "tp-cp-xp-dp-pp"}, []string{`unknown dimension "xp"`}},
		{"repeated name", Sizes{World: 8, Order: "tp-cp-dp-dp-pp"}, []string{"names dp twice"}},
		{"edp must equal dp", Sizes{World: 8, PP: 2, EP: 2, Order: "tp-pp-ep-dp"},
			[]string{`order "tp-pp-ep-dp" does not end with pp and pp = 2 > 1`,
				"dp = world/(tp·pp·cp) = 8/(1·2·1) = 4 and edp = world/(etp·ep·pp) = 8/(1·2·2) = 2"}},
		{"pipelines differ", Sizes{World: 8, TP: 2, ETP: 1, EP: 2, PP: 2, Order: "tp-pp-cp-ep-dp"},
			[]string{"pipeline groups of the dense grid (first [0 2]) and of the expert grid (first [0 1]) differ",
				"multiply to tp = 2 on the dense grid but etp = 1 on the expert grid"}},
		{"pipelines differ, two names", Sizes{World: 16, TP: 2, CP: 2, ETP: 2, EP: 1, PP: 2, Order: "tp-cp-pp-ep-dp"},
			[]string{"does not end with pp", "tp·cp = 2·2 = 4 on the dense grid but etp·cp = 2·1 = 2 on the expert grid"}},
	}
	for _, c := range cases {
		l, err := Build(c.s)
		if err == nil {
			t.Errorf("%s: Build(%+v) = %v, want an error", c.name, c.s, l.Sizes())
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error\n\t%v\ndoes not contain\n\t%s", c.name, err, w)
			}
		}
	}
}

// With ETP = TP and EP = 1 the expert grid fails exactly when the dense one does; the
// error says so once.
func TestBuildErrorOnce(t *testing.T) {
	_, err := Build(Sizes{World: 6, TP: 2, PP: 2})
	if err == nil || strings.Contains(err.Error(), "etp·ep·pp") {
		t.Errorf("Build(world 6, tp 2, pp 2) error = %v, want only the dense-grid arithmetic", err)
	}
}

// Zero sizes are Megatron's defaults.
func TestBuildDefaults(t *testing.T) {
	l := mustBuild(t, Sizes{World: 4})
	want := Dims{Sizes: Sizes{TP: 1, PP: 1, CP: 1, EP: 1, ETP: 1, World: 4, NumDistOptInstances: 1, Order: DefaultOrder}, DP: 4, EDP: 4}
	if got := l.Sizes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Sizes() = %+v, want %+v", got, want)
	}
	if got := l.DenseGrid().Order(); got != DefaultOrder {
		t.Errorf("dense order %q, want %q", got, DefaultOrder)
	}
	if got := l.ExpertGrid().Size(DimDP); got != 4 {
		t.Errorf("expert grid dp size %d, want 4", got)
	}
}
