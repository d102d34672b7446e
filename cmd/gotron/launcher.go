package main

import (
	"fmt"
	"os"
	"strconv"
)

// launcherWorld returns the number of processes a parallel launcher
// started alongside this one, and the variable that says so: Open MPI's
// mpirun (OMPI_COMM_WORLD_SIZE), a PMI launcher such as MPICH's or
// Slurm's srun --mpi=pmi2 (PMI_SIZE), or a Slurm job step
// (SLURM_STEP_NUM_TASKS). 1 when none is set.
func launcherWorld() (int, string) {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"} {
		if n, err := strconv.Atoi(os.Getenv(v)); err == nil && n > 1 {
			return n, v
		}
	}
	return 1, ""
}

// checkLauncher refuses the local backend in one of several processes a
// launcher started: each would train the whole job alone and write the
// same --save directory.
func checkLauncher(backend string) error {
	n, v := launcherWorld()
	if backend != "local" || n == 1 {
		return nil
	}
	fix := "add --backend mpi"
	if !mpiBuilt {
		fix = "run bin/gotron-mpi (make build-mpi) with --backend mpi"
	}
	return fmt.Errorf("--backend local in one of %d processes started together (%s=%d): each would train alone and write the same --save directory; %s, or start a single process (with --world-size N for N ranks in it)", n, v, n, fix)
}
