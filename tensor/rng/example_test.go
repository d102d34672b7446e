package rng_test

import (
	"fmt"

	"github.com/gotron/gotron/tensor/rng"
)

// A generator's state is a plain value: save it, draw, restore it, and the same numbers
// come again.
func ExampleRNG_State() {
	r := rng.New(1234)
	saved := r.State()
	a := r.Uint64()
	var w [4]float32
	r.FillNormal(w[:], 0, 0.02)

	r.SetState(saved)
	b := r.Uint64()
	var w2 [4]float32
	r.FillNormal(w2[:], 0, 0.02)
	fmt.Println(a == b, w == w2)
	// Output: true true
}
