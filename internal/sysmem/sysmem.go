// Package sysmem reports how much memory this process can still use: the
// kernel's estimate of available memory, lowered to the room left under the
// process's cgroup limit when there is one. Training checks its estimated
// needs against it before allocating anything.
package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Files read by Available; tests point them elsewhere.
var (
	meminfoPath   = "/proc/meminfo"
	cgroupMaxPath = "/sys/fs/cgroup/memory.max"
	cgroupCurPath = "/sys/fs/cgroup/memory.current"
)

// Available returns the bytes of memory this process can still allocate
// without swapping or being killed: MemAvailable of /proc/meminfo, or
// memory.max − memory.current of the cgroup (v2) when that is smaller. ok
// is false when neither can be read (not Linux, /proc not mounted); the
// caller then skips its check.
func Available() (bytes int64, ok bool) {
	avail, ok := memAvailable(meminfoPath)
	if room, limited := cgroupRoom(cgroupMaxPath, cgroupCurPath); limited && (!ok || room < avail) {
		return room, true
	}
	return avail, ok
}

// memAvailable parses the MemAvailable line ("MemAvailable:  24222516 kB").
func memAvailable(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "MemAvailable:" {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n < 0 || n > 1<<53 {
			return 0, false
		}
		if len(f) >= 3 && f[2] == "kB" {
			n *= 1024
		}
		return n, true
	}
	return 0, false
}

// cgroupRoom returns memory.max − memory.current (at least 0) when the
// cgroup has a limit ("max" means none).
func cgroupRoom(maxPath, curPath string) (int64, bool) {
	mb, err := os.ReadFile(maxPath)
	if err != nil {
		return 0, false
	}
	limit, err := strconv.ParseInt(strings.TrimSpace(string(mb)), 10, 64)
	if err != nil || limit <= 0 {
		return 0, false // "max" or unreadable: no limit
	}
	cb, err := os.ReadFile(curPath)
	if err != nil {
		return limit, true
	}
	cur, err := strconv.ParseInt(strings.TrimSpace(string(cb)), 10, 64)
	if err != nil || cur < 0 {
		return limit, true
	}
	return max(limit-cur, 0), true
}

// Format prints a byte count in GiB with one decimal, or MiB below 1 GiB.
func Format(n int64) string {
	if n >= 1<<30 {
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}
