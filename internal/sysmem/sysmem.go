package sysmem

import (
	"bytes"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
)

// Limit is the memory this process can still use and the limit that sets it.
type Limit struct {
	// Bytes is the room left: the limit less what is in use, at least 0.
	// A cgroup's reclaimable page cache is room, not use.
	Bytes int64
	// Source names the limit for messages: "MemAvailable of /proc/meminfo",
	// "cgroup v2 memory.max of /user.slice/x: 4.0 GiB, 1.2 GiB in use
	// (600.0 MiB page cache not counted)", "cgroup v1
	// memory.limit_in_bytes of /process_api/abc: 1.5 GiB, 210.0 MiB in use".
	Source string
}

// Available returns the smallest room this process has under the limits
// the package doc lists. ok is false when none can be read (not Linux,
// /proc not mounted); the caller then skips its check.
func Available() (l Limit, ok bool) {
	return reader{os.DirFS("/")}.available()
}

// reader reads a machine's files from its root: os.DirFS("/"), or a fake
// tree in tests. Paths are fs.FS paths, without the leading "/".
type reader struct{ fsys fs.FS }

// available returns the smallest of limits' rooms; the first listed wins a tie.
func (r reader) available() (Limit, bool) {
	var best Limit
	found := false
	for _, l := range r.limits() {
		if !found || l.Bytes < best.Bytes {
			best, found = l, true
		}
	}
	return best, found
}

// limits lists the room under every limit found: cgroup v2's, then v1's,
// each from the process's own group up, then MemAvailable.
func (r reader) limits() []Limit {
	self := parseCgroup(r.read("proc/self/cgroup"))
	mounts := parseMountinfo(r.read("proc/self/mountinfo"))
	var out []Limit
	if self.v2 != "" {
		h := hierarchy{name: "cgroup v2", fstype: "cgroup2", limitFile: "memory.max", usageFile: "memory.current",
			cacheKeys: []string{"inactive_file"}}
		out = append(out, r.cgroupLimits(h, mounts, self.v2)...)
	}
	if self.v1 != "" {
		h := hierarchy{name: "cgroup v1", fstype: "cgroup", option: "memory",
			limitFile: "memory.limit_in_bytes", usageFile: "memory.usage_in_bytes", hierarchyFile: "memory.use_hierarchy",
			cacheKeys: []string{"total_inactive_file", "inactive_file"}}
		out = append(out, r.cgroupLimits(h, mounts, self.v1)...)
	}
	if n, ok := parseMeminfo(r.read("proc/meminfo")); ok {
		out = append(out, Limit{Bytes: n, Source: "MemAvailable of /proc/meminfo"})
	}
	return out
}

// read returns the file's contents, or nil if it cannot be read.
func (r reader) read(name string) []byte {
	b, err := fs.ReadFile(r.fsys, name)
	if err != nil {
		return nil
	}
	return b
}

// parseMeminfo returns the bytes of the MemAvailable line of /proc/meminfo
// ("MemAvailable:   24222516 kB").
func parseMeminfo(b []byte) (int64, bool) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 2 || f[0] != "MemAvailable:" {
			continue
		}
		unit := int64(1)
		if len(f) >= 3 && f[2] == "kB" {
			unit = 1024
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || n < 0 || n > 1<<53/unit {
			return 0, false // beyond 8 PiB: garbled
		}
		return n * unit, true
	}
	return 0, false
}

// parseBytes reads a cgroup file holding one count of bytes
// ("1610612736\n"); v2's "max" is math.MaxInt64.
func parseBytes(b []byte) (int64, bool) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return math.MaxInt64, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// Format prints a byte count in GiB with one decimal, or MiB below 1 GiB.
func Format(n int64) string {
	if n >= 1<<30 {
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}
