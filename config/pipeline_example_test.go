package config_test

import (
	"fmt"

	"github.com/gotron/gotron/config"
)

// PipelineChunks says which layers each model chunk (pipeline rank p,
// virtual stage v) builds, here for an uneven split and for a layout.
func ExampleTransformerConfig_PipelineChunks() {
	c := config.DefaultTransformerConfig()
	c.NumLayers = 10
	c.PipelineModelParallelSize = 4
	c.NumLayersInFirstPipelineStage, c.NumLayersInLastPipelineStage = 1, 3
	chunks, err := c.PipelineChunks()
	if err != nil {
		fmt.Println(err)
		return
	}
	for p, row := range chunks {
		fmt.Printf("pp %d: %+v\n", p, row[0])
	}

	c = config.DefaultTransformerConfig()
	c.NumLayers = 1
	c.PipelineModelParallelSize = 2
	c.PipelineModelParallelLayout = "E||t|L" // 4 stages: vpp 2
	fmt.Println("vpp:", c.ResolvePipelineLayout().VirtualPipelineModelParallelSize)
	chunks, _ = c.PipelineChunks()
	fmt.Printf("pp 1, vp 1: %+v\n", chunks[1][1])

	c.PipelineModelParallelLayout = "Et*3|tt|x|L"
	_, err = c.PipelineChunks()
	fmt.Println(err)
	// Output:
	// pp 0: {PreProcess:true PostProcess:false LayerOffset:0 NumLayers:1 MTPLayers:0 FinalNorm:false AfterMTP:false}
	// pp 1: {PreProcess:false PostProcess:false LayerOffset:1 NumLayers:3 MTPLayers:0 FinalNorm:false AfterMTP:false}
	// pp 2: {PreProcess:false PostProcess:false LayerOffset:4 NumLayers:3 MTPLayers:0 FinalNorm:false AfterMTP:false}
	// pp 3: {PreProcess:false PostProcess:true LayerOffset:7 NumLayers:3 MTPLayers:0 FinalNorm:true AfterMTP:false}
	// vpp: 2
	// pp 1, vp 1: {PreProcess:false PostProcess:true LayerOffset:1 NumLayers:0 MTPLayers:0 FinalNorm:true AfterMTP:false}
	// config: 1 invalid setting:
	//   - pipeline_model_parallel_layout "Et*3|tt|x|L": invalid layer character 'x' at position 9 (stage 2): use E (embedding), t (decoder), m (MTP), L (loss), | between stages
	//     Et*3|tt|x|L
	//             ^
}
