package sysmem_test

import (
	"fmt"

	"github.com/gotron/gotron/internal/sysmem"
)

// ExampleAvailable prints the room this process has and the limit that
// sets it, e.g. "1.3 GiB available (cgroup v1 memory.limit_in_bytes of
// /process_api/abc: 1.5 GiB, 204.8 MiB in use)".
func ExampleAvailable() {
	l, ok := sysmem.Available()
	if !ok {
		fmt.Println("no limit can be read: memory is not checked")
		return
	}
	fmt.Printf("%s available (%s)\n", sysmem.Format(l.Bytes), l.Source)
}
