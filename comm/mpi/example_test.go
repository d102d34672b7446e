//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gotron/gotron/comm"
	"github.com/gotron/gotron/comm/mpi"
)

// A World under mpirun: every process runs the same code, each as one rank,
// and every rank prints the same line.
func ExampleWorld() {
	w, err := mpi.NewWorld(comm.Options{Timeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	err = w.Run(context.Background(), func(ctx context.Context, g comm.Group) error {
		x := []float32{float32(g.Rank() + 1)}
		if err := g.AllReduce(ctx, comm.F32(x), comm.Sum); err != nil {
			return err
		}
		n := g.Size()
		fmt.Printf("Σ (rank+1) = n(n+1)/2: %v\n", x[0] == float32(n*(n+1)/2))
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: Σ (rank+1) = n(n+1)/2: true
}

// A whole MPI program: Run initialises MPI, runs the function on this
// process's rank, and finalises MPI. (Not run by go test: it finalises MPI.)
func ExampleRun() {
	err := mpi.Run(context.Background(), comm.Options{Timeout: 10 * time.Minute},
		func(ctx context.Context, g comm.Group) error {
			var pairs [][]int // {0, 1}, {2, 3}, …
			for r := 0; r+1 < g.Size(); r += 2 {
				pairs = append(pairs, []int{r, r + 1})
			}
			tp, err := g.NewSubgroups(ctx, "tp", pairs)
			if err != nil || tp == nil {
				return err
			}
			x := comm.BF16([]uint16{comm.F32ToBF16(1)})
			return tp.AllReduce(ctx, x, comm.Avg)
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
