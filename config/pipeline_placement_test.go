package config

import (
	"strings"
	"testing"
)

// TestPipelinePlacementStages checks that Stage and Chunk are inverse
// maps onto [0, P·V), that Next and Prev walk the stages in order, and
// that Ends names the ranks of the first and the last stage.
func TestPipelinePlacementStages(t *testing.T) {
	for _, pl := range []PipelinePlacement{PlacementLoop, PlacementV} {
		for P := 1; P <= 6; P++ {
			for V := 1; V <= 3; V++ {
				if pl.Check(V) != nil {
					continue
				}
				first, _ := pl.Chunk(P, V, 0)
				last, _ := pl.Chunk(P, V, P*V-1)
				if f, l := pl.Ends(P); f != first || l != last {
					t.Fatalf("%v P=%d V=%d: Ends %d, %d; the stages' ranks %d, %d", pl, P, V, f, l, first, last)
				}
				seen := map[int]bool{}
				for p := 0; p < P; p++ {
					for v := 0; v < V; v++ {
						s := pl.Stage(P, V, p, v)
						if s < 0 || s >= P*V || seen[s] {
							t.Fatalf("%v P=%d V=%d: chunk (%d,%d) holds stage %d (seen %v)", pl, P, V, p, v, s, seen[s])
						}
						seen[s] = true
						if q, w := pl.Chunk(P, V, s); q != p || w != v {
							t.Fatalf("%v P=%d V=%d: stage %d is chunk (%d,%d), want (%d,%d)", pl, P, V, s, q, w, p, v)
						}
						q, w, ok := pl.Next(P, V, p, v)
						if ok != (s < P*V-1) || ok && pl.Stage(P, V, q, w) != s+1 || pl.LastStage(P, V, p, v) == ok {
							t.Fatalf("%v P=%d V=%d: next of stage %d is (%d,%d) ok=%v", pl, P, V, s, q, w, ok)
						}
						q, w, ok = pl.Prev(P, V, p, v)
						if ok != (s > 0) || ok && pl.Stage(P, V, q, w) != s-1 || pl.FirstStage(P, V, p, v) == ok {
							t.Fatalf("%v P=%d V=%d: previous of stage %d is (%d,%d) ok=%v", pl, P, V, s, q, w, ok)
						}
					}
				}
			}
		}
	}
}

// TestPipelinePlacementV checks the V placement of four ranks against the
// zero-bubble paper's picture: down the ranks on chunk 0, back up on
// chunk 1, the first and the last stage on rank 0.
func TestPipelinePlacementV(t *testing.T) {
	want := [4][2]int{{0, 7}, {1, 6}, {2, 5}, {3, 4}}
	for p, st := range want {
		for v, s := range st {
			if got := PlacementV.Stage(4, 2, p, v); got != s {
				t.Errorf("V placement, chunk (%d,%d): stage %d, want %d", p, v, got, s)
			}
			if got := PlacementLoop.Stage(4, 2, p, v); got != v*4+p {
				t.Errorf("loop placement, chunk (%d,%d): stage %d, want %d", p, v, got, v*4+p)
			}
		}
	}
	if q, w, ok := PlacementV.Next(4, 2, 3, 0); !ok || q != 3 || w != 1 {
		t.Errorf("V placement: the last rank's chunk 0 feeds (%d,%d) ok=%v, want its own chunk 1", q, w, ok)
	}
	if !PlacementV.LastStage(4, 2, 0, 1) || !PlacementV.FirstStage(4, 2, 0, 0) {
		t.Error("V placement: rank 0 must hold the first and the last stage")
	}
	if PlacementV.Check(3) == nil || PlacementV.Check(2) != nil || PlacementLoop.Check(3) != nil {
		t.Error("V placement: Check must accept two chunks per rank only")
	}
}

// TestPipelineChunksV: under the V placement the model is cut into the
// interleaved schedule's stages and chunk (p, v) holds stage
// Stage(p, v) of them: rank 0 the embedding and the loss, the last rank
// the two middle stages; a V without two chunks per rank is refused by
// PipelineChunks (pp's schedule check refuses it to --pipeline-schedule's
// users, naming the flags).
func TestPipelineChunksV(t *testing.T) {
	c := DefaultTransformerConfig()
	c.NumLayers, c.HiddenSize, c.NumAttentionHeads, c.SeqLength, c.VocabSize = 8, 32, 4, 16, 64
	c.PipelineModelParallelSize, c.VirtualPipelineModelParallelSize, c.OverlapP2PComm, c.BatchP2PComm = 2, 2, false, false
	c.PipelineDType = Float32
	loop, err := c.PipelineChunks()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "overlap_p2p_comm") {
		t.Errorf("the interleaved schedule at PP 2 without overlap_p2p_comm: Validate gave %v", err)
	}
	c.PipelinePlacement = PlacementV
	if err := c.Validate(); err != nil {
		t.Fatalf("ZB-V at PP 2 without overlap_p2p_comm: %v", err)
	}
	v, err := c.PipelineChunks()
	if err != nil {
		t.Fatal(err)
	}
	want := [2][2]PipelineChunk{{loop[0][0], loop[1][1]}, {loop[1][0], loop[0][1]}}
	for p := range want {
		for w := range want[p] {
			if v[p][w] != want[p][w] {
				t.Errorf("chunk (%d,%d): %+v, want %+v", p, w, v[p][w], want[p][w])
			}
		}
	}
	if !v[0][0].PreProcess || !v[0][1].PostProcess || v[1][0].PreProcess || v[1][1].PostProcess {
		t.Errorf("the V must put the embedding and the loss on rank 0: %+v", v)
	}
	for _, bad := range []func(*TransformerConfig){
		func(c *TransformerConfig) { c.VirtualPipelineModelParallelSize = 3; c.NumLayers = 12 },
		func(c *TransformerConfig) { c.VirtualPipelineModelParallelSize = 0 },
	} {
		b := c
		bad(&b)
		if _, err := b.PipelineChunks(); err == nil || !strings.Contains(err.Error(), "virtual_pipeline_model_parallel_size to 2") {
			t.Errorf("V placement with vpp %d: PipelineChunks gave %v", b.VirtualPipelineModelParallelSize, err)
		}
	}
}
