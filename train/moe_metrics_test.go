package train

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotron/gotron/config"
	"github.com/gotron/gotron/moe"
)

// moeLogRun trains a with --log-json and returns the iteration records'
// MoE metrics and the text log; moeLog also the JSON file.
func moeLogRun(t *testing.T, a Args) ([]*moe.Metrics, string) {
	t.Helper()
	recs, out, _ := moeLog(t, a)
	return recs, out
}

func moeLog(t *testing.T, a Args) ([]*moe.Metrics, string, string) {
	t.Helper()
	a.LogJSON = filepath.Join(t.TempDir(), "log.jsonl")
	var out strings.Builder
	if _, err := Run(context.Background(), a, Options{Out: &out}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(a.LogJSON)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []*moe.Metrics
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			ValidLoss *float64     `json:"valid_loss"`
			MoE       *moe.Metrics `json:"moe"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.ValidLoss == nil {
			recs = append(recs, r.MoE)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(recs) != a.TrainIters {
		t.Fatalf("%d iteration records, want %d", len(recs), a.TrainIters)
	}
	raw, err := os.ReadFile(a.LogJSON)
	if err != nil {
		t.Fatal(err)
	}
	return recs, out.String(), string(raw)
}

// checkMoEMetrics compares a run's per-iteration MoE metrics with the
// one-rank run's: the same layers and names, tokens per expert exactly,
// the losses to 1e-6 relative.
func checkMoEMetrics(t *testing.T, got, want []*moe.Metrics) {
	t.Helper()
	for it := range want {
		g, w := got[it], want[it]
		if g == nil {
			t.Fatalf("iteration %d: no MoE metrics", it+1)
		}
		if !slices.Equal(g.Layers, w.Layers) {
			t.Fatalf("iteration %d: layers %v, one rank %v", it+1, g.Layers, w.Layers)
		}
		if fmt.Sprint(g.TokensPerExpert) != fmt.Sprint(w.TokensPerExpert) {
			t.Errorf("iteration %d: tokens per expert %v, one rank %v", it+1, g.TokensPerExpert, w.TokensPerExpert)
		}
		for _, l := range []struct {
			name      string
			got, want []float64
		}{
			{"load_balancing_loss", g.LoadBalancingLoss, w.LoadBalancingLoss},
			{"seq_load_balancing_loss", g.SeqLoadBalancingLoss, w.SeqLoadBalancingLoss},
			{"z_loss", g.ZLoss, w.ZLoss},
		} {
			if len(l.got) != len(l.want) {
				t.Fatalf("iteration %d: %s %v, one rank %v", it+1, l.name, l.got, l.want)
			}
			for i := range l.want {
				if e := relErr(l.got[i], l.want[i]); e > 1e-6 {
					t.Errorf("iteration %d, layer %d: %s %.9g, one rank %.9g (relative difference %.2g > 1e-6)", it+1, g.Layers[i], l.name, l.got[i], l.want[i], e)
				}
			}
		}
	}
}

// TestMoEMetricsMatchSingleRank is the MoE metrics' layout-equivalence
// test: the logged per-layer load-balancing and z losses and tokens per
// expert of every iteration equal the one-rank run's (tokens exactly,
// losses to 1e-6) under data, expert, tensor + sequence, pipeline (with a
// stage that holds no MoE layer) and context parallelism, for the
// load-balancing loss and the sequence-level one. On one rank each
// iteration routes every token of the global batch to top-k experts: the
// token counts are the iteration's own (the statistics are reset), and
// the losses are near their balanced values.
func TestMoEMetricsMatchSingleRank(t *testing.T) {
	for _, variant := range []struct {
		name   string
		lbName string
		set    func(m *config.TransformerConfig)
	}{
		{"aux_loss", "load_balancing_loss", func(*config.TransformerConfig) {}},
		{"seq_aux_loss-no-z", "seq_load_balancing_loss", func(m *config.TransformerConfig) {
			m.MoERouterLoadBalancingType, m.MoEZLossCoeff = "seq_aux_loss", 0
		}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			one := moeArgs(1)
			one.TrainIters = 3
			variant.set(&one.Model)
			want, _ := moeLogRun(t, one)
			m := one.Model
			perIteration := int64(one.GlobalBatchSize * m.SeqLength * m.MoERouterTopK)
			for it, r := range want {
				if r == nil || len(r.Layers) != m.NumLayers {
					t.Fatalf("iteration %d: MoE metrics %+v, want all %d layers", it+1, r, m.NumLayers)
				}
				for i, tok := range r.TokensPerExpert {
					var sum int64
					for _, n := range tok {
						sum += n
					}
					if len(tok) != m.NumMoEExperts || sum != perIteration {
						t.Errorf("iteration %d, layer %d: tokens per expert %v: %d routed, want %d experts and global batch × sequence × top-k = %d", it+1, i, tok, sum, m.NumMoEExperts, perIteration)
					}
				}
				lb := r.LoadBalancingLoss
				if variant.lbName == "seq_load_balancing_loss" {
					lb = r.SeqLoadBalancingLoss
					if r.LoadBalancingLoss != nil || r.ZLoss != nil {
						t.Errorf("iteration %d: seq_aux_loss without a z loss logs %+v", it+1, r)
					}
				} else if len(r.ZLoss) != m.NumLayers || r.SeqLoadBalancingLoss != nil {
					t.Errorf("iteration %d: aux_loss with a z loss logs %+v", it+1, r)
				}
				// The losses divided by their coefficients: a balanced
				// router's load-balancing loss is about 1 (top-2 of 4
				// experts: E/k · Σ f·P with f = k/E, P = 1/E), far from
				// the sum over the microbatches (4) or the replicas.
				for i, v := range lb {
					if len(lb) != m.NumLayers || v < 0.5 || v > 2 {
						t.Errorf("iteration %d, layer %d: %s %g, want near 1", it+1, i, variant.lbName, v)
					}
				}
			}
			for _, l := range []struct {
				moeLayout
				freq []int
			}{
				{moeLayout: moeLayout{world: 2}},
				{moeLayout: moeLayout{world: 2, ep: 2}},
				{moeLayout: moeLayout{world: 4, ep: 2, dispatcher: "alltoall"}},
				{moeLayout: moeLayout{world: 4, tp: 2, sp: true, ep: 2, dispatcher: "alltoall"}},
				{moeLayout: moeLayout{world: 4, ep: 2, pp: 2, dispatcher: "alltoall"}},
				{moeLayout: moeLayout{world: 2, pp: 2}, freq: []int{1, 1, 0, 0}},
				{moeLayout: moeLayout{world: 2, cp: 2, ep: 2, dispatcher: "alltoall"}},
			} {
				name := l.String()
				if l.freq != nil {
					name += fmt.Sprintf("/moe-layer-freq%v", l.freq)
				}
				t.Run(name, func(t *testing.T) {
					a := l.args()
					a.TrainIters = one.TrainIters
					variant.set(&a.Model)
					ref := want
					if l.freq != nil {
						a.Model.MoELayerFreq = l.freq
						o := one
						o.Model.MoELayerFreq = l.freq
						ref, _ = moeLogRun(t, o)
						if !slices.Equal(ref[0].Layers, []int{0, 1}) {
							t.Fatalf("MoE layers %v, want [0 1] (all on the first of two stages)", ref[0].Layers)
						}
					}
					got, _ := moeLogRun(t, a)
					checkMoEMetrics(t, got, ref)
				})
			}
		})
	}
}

// TestMoELogLine: the iteration line of a MoE model gives Megatron's
// "load_balancing_loss" and "z_loss" after the lm loss, each the mean
// over the MoE layers averaged over the interval's iterations (here
// iterations 1–2 and 3); a dense model's line has neither and its JSON
// records no "moe".
func TestMoELogLine(t *testing.T) {
	a := moeArgs(1)
	a.TrainIters, a.LogInterval = 3, 2
	recs, out := moeLogRun(t, a)
	re := regexp.MustCompile(`lm loss: \S+ \| load_balancing_loss: (\S+) \| z_loss: (\S+) \| `)
	lines := re.FindAllStringSubmatch(out, -1)
	if len(lines) != 2 {
		t.Fatalf("%d iteration lines with the MoE losses after the lm loss, want 2:\n%s", len(lines), out)
	}
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	for i, its := range [][]int{{0, 1}, {2}} {
		var lb, z float64
		for _, it := range its {
			lb += mean(recs[it].LoadBalancingLoss) / float64(len(its))
			z += mean(recs[it].ZLoss) / float64(len(its))
		}
		for j, want := range []float64{lb, z} {
			got, err := strconv.ParseFloat(lines[i][j+1], 64)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-want) > 1e-6*math.Abs(want) {
				t.Errorf("line %d, loss %d: %s, want %.6E", i+1, j, lines[i][j+1], want)
			}
		}
	}

	d := tpArgs(1, 1)
	d.TrainIters, d.LRWarmupIters = 1, 0
	dense, out, raw := moeLog(t, d)
	if dense[0] != nil || strings.Contains(out, "load_balancing_loss") || strings.Contains(out, "z_loss") {
		t.Errorf("a dense model logs MoE metrics: %+v\n%s", dense[0], out)
	}
	if strings.Contains(raw, `"moe"`) {
		t.Errorf("a dense model's --log-json has a \"moe\" key:\n%s", raw)
	}
}
