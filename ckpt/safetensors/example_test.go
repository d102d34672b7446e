package safetensors_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gotron/gotron/ckpt/safetensors"
)

func Example() {
	dir, err := os.MkdirTemp("", "safetensors-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	w := safetensors.F32("decoder.final_layernorm.weight", []int{4}, []float32{1, 1, 1, 1})
	b := safetensors.F32("decoder.final_layernorm.bias", []int{4}, []float32{0, 0, 0, 0})
	if err := safetensors.WriteFile(path, []safetensors.Tensor{w, b}, map[string]string{"iteration": "100"}); err != nil {
		log.Fatal(err)
	}

	f, err := safetensors.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range f.Tensors {
		v, _ := t.Float32()
		fmt.Println(t.Name, t.DType, t.Shape, v)
	}
	fmt.Println(f.Metadata["iteration"])
	err = f.Check(map[string][]int{"decoder.final_layernorm.weight": {8}, "decoder.final_layernorm.bias": {8}})
	fmt.Println(err != nil)
	// Output:
	// decoder.final_layernorm.bias F32 [4] [0 0 0 0]
	// decoder.final_layernorm.weight F32 [4] [1 1 1 1]
	// 100
	// true
}
