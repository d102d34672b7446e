package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts a CPU profile (go tool pprof) written to path, as
// --cpuprofile asks; with --backend mpi each process writes its own,
// path.rankN. The returned function stops it and closes the file.
func startCPUProfile(path, backend string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	if r := os.Getenv("OMPI_COMM_WORLD_RANK"); backend == "mpi" && r != "" {
		path += ".rank" + r // one profile per process
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
