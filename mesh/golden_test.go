package mesh

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gotron/gotron/internal/golden"
)

// goldenLayouts are the layouts whose table and JSON are recorded under testdata/.
func goldenLayouts() []struct {
	file string
	s    Sizes
} {
	return []struct {
		file string
		s    Sizes
	}{
		{"w16_tp2_pp2", Sizes{World: 16, TP: 2, PP: 2}},
		{"w16_tp2_cp2_pp2", Sizes{World: 16, TP: 2, CP: 2, PP: 2}},
		{"w16_tp2_pp2_ep2", Sizes{World: 16, TP: 2, PP: 2, EP: 2}},
		{"w8_ep2_distopt2", Sizes{World: 8, EP: 2, NumDistOptInstances: 2}},
		{"w8_tp2_pp2_tp-pp-dp", Sizes{World: 8, TP: 2, PP: 2, Order: "tp-pp-dp"}},
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	golden.Check(t, path, got)
}

func TestGoldenTable(t *testing.T) {
	for _, c := range goldenLayouts() {
		l := mustBuild(t, c.s)
		var b bytes.Buffer
		if err := l.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, filepath.Join("testdata", c.file+".table.txt"), b.Bytes())
	}
}

func TestGoldenJSON(t *testing.T) {
	for _, c := range goldenLayouts() {
		l := mustBuild(t, c.s)
		var b bytes.Buffer
		if err := l.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, filepath.Join("testdata", c.file+".json"), b.Bytes())
	}
}

// The JSON document decodes to the layout's own sizes and groups, and json.Marshal
// gives the same document.
func TestJSONRoundTrip(t *testing.T) {
	for _, c := range goldenLayouts() {
		l := mustBuild(t, c.s)
		raw, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			WorldSize *int               `json:"world_size"`
			Order     *string            `json:"order"`
			Sizes     map[string]int     `json:"sizes"`
			Groups    map[string][][]int `json:"groups"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		d := l.Sizes()
		if doc.WorldSize == nil || *doc.WorldSize != d.World || doc.Order == nil || *doc.Order != d.Order {
			t.Errorf("%s: world_size/order = %v/%v, want %d/%q", c.file, doc.WorldSize, doc.Order, d.World, d.Order)
		}
		wantSizes := map[string]int{"tp": d.TP, "cp": d.CP, "dp": d.DP, "pp": d.PP, "ep": d.EP, "etp": d.ETP, "edp": d.EDP,
			"num_distributed_optimizer_instances": d.NumDistOptInstances}
		if !reflect.DeepEqual(doc.Sizes, wantSizes) {
			t.Errorf("%s: sizes = %v, want %v", c.file, doc.Sizes, wantSizes)
		}
		if len(doc.Groups) != len(l.Names()) {
			t.Errorf("%s: %d group kinds in JSON, want %d", c.file, len(doc.Groups), len(l.Names()))
		}
		for _, name := range l.Names() {
			checkGroups(t, c.file+" "+name, doc.Groups[name], l.Groups(name))
		}
		var direct bytes.Buffer
		if err := json.Compact(&direct, l.jsonBytes()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, direct.Bytes()) {
			t.Errorf("%s: json.Marshal differs from the compacted WriteJSON document", c.file)
		}
	}
}
