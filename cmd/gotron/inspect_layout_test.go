package main

import (
	"strings"
	"testing"
)

// TestInspectLayoutJSON checks the exact JSON of "E||t|L" (docs/SEMANTICS.md
// § Pipeline layout strings) at PP 2 (VPP 2 from the layout: pp0 [E | t],
// pp1 [empty | L]) and of the even split with virtual stages (8 layers,
// PP 2, VPP 2: pp0 [0 1] [4 5], pp1 [2 3] [6 7], the reference's comment in
// get_num_layers_to_build).
func TestInspectLayoutJSON(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "E||t|L"},
			`{"stages":[["E"],[],["t"],["L"]],"ranks":[` +
				`{"rank":0,"chunks":[{"vpp":0,"layers":[],"decoder_offset":0},{"vpp":1,"layers":[0],"decoder_offset":0}]},` +
				`{"rank":1,"chunks":[{"vpp":0,"layers":[],"decoder_offset":0},{"vpp":1,"layers":[],"decoder_offset":1}]}]}`},
		{[]string{"--num-layers", "8", "--pipeline-model-parallel-size", "2", "--virtual-pipeline-model-parallel-size", "2"},
			`{"stages":[["E","t","t"],["t","t"],["t","t"],["t","t","L"]],"ranks":[` +
				`{"rank":0,"chunks":[{"vpp":0,"layers":[0,1],"decoder_offset":0},{"vpp":1,"layers":[4,5],"decoder_offset":4}]},` +
				`{"rank":1,"chunks":[{"vpp":0,"layers":[2,3],"decoder_offset":2},{"vpp":1,"layers":[6,7],"decoder_offset":6}]}]}`},
		{[]string{"--num-layers", "6", "--pipeline-model-parallel-size", "4", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"},
			`{"stages":[["E","t"],["t","t"],["t","t"],["t","L"]],"ranks":[` +
				`{"rank":0,"chunks":[{"vpp":0,"layers":[0],"decoder_offset":0}]},{"rank":1,"chunks":[{"vpp":0,"layers":[1,2],"decoder_offset":1}]},` +
				`{"rank":2,"chunks":[{"vpp":0,"layers":[3,4],"decoder_offset":3}]},{"rank":3,"chunks":[{"vpp":0,"layers":[5],"decoder_offset":5}]}]}`},
		{[]string{"--num-layers", "10", "--pipeline-model-parallel-size", "4", "--decoder-first-pipeline-num-layers", "1", "--decoder-last-pipeline-num-layers", "3"},
			`{"stages":[["E","t"],["t","t","t"],["t","t","t"],["t","t","t","L"]],"ranks":[` +
				`{"rank":0,"chunks":[{"vpp":0,"layers":[0],"decoder_offset":0}]},{"rank":1,"chunks":[{"vpp":0,"layers":[1,2,3],"decoder_offset":1}]},` +
				`{"rank":2,"chunks":[{"vpp":0,"layers":[4,5,6],"decoder_offset":4}]},{"rank":3,"chunks":[{"vpp":0,"layers":[7,8,9],"decoder_offset":7}]}]}`},
		{[]string{"--num-layers", "4", "--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"},
			`{"stages":[["E","t"],["t"],["t"],["t","L"]],"ranks":[` +
				`{"rank":0,"chunks":[{"vpp":0,"layers":[0],"decoder_offset":0},{"vpp":1,"layers":[2],"decoder_offset":2}]},` +
				`{"rank":1,"chunks":[{"vpp":0,"layers":[1],"decoder_offset":1},{"vpp":1,"layers":[3],"decoder_offset":3}]}]}`},
		{[]string{"--num-layers", "3"},
			`{"stages":[["E","t","t","t","L"]],"ranks":[{"rank":0,"chunks":[{"vpp":0,"layers":[0,1,2],"decoder_offset":0}]}]}`},
	} {
		args := append([]string{"inspect", "layout"}, tc.args...)
		out, err := run(t, append(args, "--json")...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, out)
		}
		if strings.TrimSpace(out) != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.args, strings.TrimSpace(out), tc.want)
		}
	}
}

// TestInspectLayoutTable checks the table of the DeepSeek layout of
// docs/SEMANTICS.md § Pipeline layout strings (PP 16, VPP 2 from the layout).
func TestInspectLayoutTable(t *testing.T) {
	out, err := run(t, "inspect", "layout", "--pipeline-model-parallel-size", "16", "--pipeline-model-parallel-layout", "Et*3|(tt|)*29,m|L")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "pipeline_model_parallel_size 16 × 2 virtual stages, num_layers 61, mtp_num_layers 1") {
		t.Errorf("header:\n%s", out)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			rows[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for rank, want := range map[string]string{
		"0": "E t0-2 t33-34", "1": "t3-4 t35-36", "13": "t27-28 t59-60", "14": "t29-30 m", "15": "t31-32 L",
	} {
		if rows[rank] != want {
			t.Errorf("rank %s: %q, want %q\n%s", rank, rows[rank], want, out)
		}
	}

	out, err = run(t, "inspect", "layout", "--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "E||t|L")
	if err != nil || !strings.Contains(out, "(empty)") {
		t.Errorf("%v\n%s", err, out)
	}
}

// TestInspectLayoutV: --pipeline-schedule zb-v places the same stages in a
// V: rank 0 holds the first and the last, the last rank the two middle
// ones; the layout line keeps the model's order; without two virtual
// stages it is refused.
func TestInspectLayoutV(t *testing.T) {
	out, err := run(t, "inspect", "layout", "--num-layers", "8", "--pipeline-model-parallel-size", "4",
		"--virtual-pipeline-model-parallel-size", "2", "--pipeline-schedule", "zb-v")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"layout Et|t|t|t|t|t|t|tL", "placed in a V", "\n0         E t0         t7 L\n", "\n3         t3           t4\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "inspect", "layout", "--num-layers", "8", "--pipeline-model-parallel-size", "4", "--pipeline-schedule", "zb-v"); err == nil ||
		!strings.Contains(err.Error(), "--virtual-pipeline-model-parallel-size 2") {
		t.Errorf("zb-v without virtual stages: %v", err)
	}
}

func TestInspectLayoutErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pipeline-model-parallel-layout", "Et*3|tt|x|L"},
			"invalid layer character 'x' at position 9 (stage 2)"},
		{[]string{"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et|t|tt|tt|tt|L"},
			"layout has 6 stages, not divisible by pipeline_model_parallel_size 4: use a multiple of 4 stages (4 or 8)"},
		{[]string{"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et|tt|tt|ttL", "--num-layers", "8"},
			"layout has 7 decoder layers (t) but num_layers is 8"},
		{[]string{"--pipeline-model-parallel-size", "4", "--num-layers", "6"},
			"num_layers 6 is not divisible by pipeline_model_parallel_size 4: use --num-layers 4 or 8"},
		{[]string{"--pipeline-model-parallel-size", "4", "--num-layers", "8", "--pipeline-model-parallel-layout", "E|t*8|t*0|L", "--decoder-first-pipeline-num-layers", "2"},
			"pipeline_model_parallel_layout cannot be set with other pipeline layout arguments"},
		{[]string{"--pipeline-model-parallel-size", "1"}, "num_layers is 0"},
		{[]string{"--virtual-pipeline-model-parallel-size", "2", "--num-layers", "4"}, "needs pipeline_model_parallel_size > 1"},
	} {
		out, err := run(t, append([]string{"inspect", "layout"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
}
