package main

import (
	"strings"
	"testing"
)

// TestLocalBackendUnderALauncherRefused: the mpirun without
// --backend mpi ran N independent jobs into one --save directory.
func TestLocalBackendUnderALauncherRefused(t *testing.T) {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, "4")
			_, err := run(t, "train", "--mock-data", "--train-iters", "1")
			if err == nil || !strings.Contains(err.Error(), "--backend local in one of 4 processes") || !strings.Contains(err.Error(), v+"=4") {
				t.Fatalf("got %v, want the launcher named", err)
			}
		})
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "1")
	if n, _ := launcherWorld(); n != 1 {
		t.Errorf("a world of 1 is %d", n)
	}
}
