package sysmem

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseCgroup: any /proc/self/cgroup gives absolute paths or none.
func FuzzParseCgroup(f *testing.F) {
	for _, s := range []string{v1Self, "0::/\n", "0::/user.slice/a b\n", "0::/../../init.scope", "4:cpu,memory:/a\n",
		"0:/a\n", "::\n", "0::a\n", "4:memory:/x:y\n", "", "\n\n", "12:memory::\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := parseCgroup(b)
		for _, cg := range []string{p.v2, p.v1} {
			if cg != "" && !strings.HasPrefix(cg, "/") {
				t.Fatalf("%q: a relative path %q", b, cg)
			}
		}
	})
}

// FuzzParseMountinfo: any mountinfo gives mounts with absolute paths, and
// finding a group in them never panics nor leaves the mount.
func FuzzParseMountinfo(f *testing.F) {
	for _, s := range []string{v1Mounts, v2Mounts, "40 31 0:38 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n",
		`1 2 3:4 /a\040b /mnt\011x rw shared:1 master:2 - cgroup cgroup rw,memory` + "\n",
		"1 2 3 4 5 6 - \n", "- - - - - - - - -\n", `1 2 3:4 \ \\ rw - x y z`, ""} {
		f.Add([]byte(s), "/process_api/abc")
	}
	f.Fuzz(func(t *testing.T, b []byte, cg string) {
		mounts := parseMountinfo(b)
		for _, m := range mounts {
			if !strings.HasPrefix(m.root, "/") || !strings.HasPrefix(m.point, "/") {
				t.Fatalf("%q: a relative path in %+v", b, m)
			}
		}
		h := hierarchy{fstype: "cgroup", option: "memory"}
		if m, rel, ok := h.place(mounts, cg); ok && (!strings.HasPrefix(rel, "/") || slices.Contains(strings.Split(rel, "/"), "..")) {
			t.Fatalf("%q in %q: mount %+v, relative path %q", cg, b, m, rel)
		}
	})
}

// FuzzParseMeminfo: any meminfo gives a count of bytes of at least 0.
func FuzzParseMeminfo(f *testing.F) {
	for _, s := range []string{meminfo, "MemAvailable: 1\n", "MemAvailable: -1 kB\n", "MemAvailable: 99999999999999999999 kB",
		"MemAvailable:\n", "MemAvailable: 9007199254740992 kB\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, ok := parseMeminfo(b); ok && n < 0 {
			t.Fatalf("%q: %d bytes", b, n)
		}
	})
}

// FuzzParseBytes: any cgroup count gives at least 0.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"max\n", v1Unlimited, "1610612736\n", "-1", "", " 12 ", "0x10", "99999999999999999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, ok := parseBytes(b); ok && n < 0 {
			t.Fatalf("%q: %d bytes", b, n)
		}
	})
}

// FuzzParseMemoryStat: any memory.stat gives a count of at least 0, and a
// cgroup's room with it is at least the limit less the whole usage and at
// most the limit.
func FuzzParseMemoryStat(f *testing.F) {
	for _, s := range []string{v2Stat, v1Stat, "inactive_file 0\n", "inactive_file -1\n", "inactive_file 1 2\n",
		"inactive_file 99999999999999999999\n", "inactive_file\n", "total_inactive_file 1\ninactive_file 2\n", "", "\x00"} {
		f.Add([]byte(s), "inactive_file")
	}
	f.Add([]byte(v1Stat), "total_inactive_file")
	f.Fuzz(func(t *testing.T, b []byte, key string) {
		if n, ok := parseMemoryStat(b, key); ok && n < 0 {
			t.Fatalf("%q, %q: %d bytes", b, key, n)
		}
		const limit, used = 2 << 30, 3 << 29
		fsys := machine(map[string]string{"a/memory.max": "2147483648\n", "a/memory.current": "1610612736\n", "a/memory.stat": string(b)})
		h := hierarchy{limitFile: "memory.max", usageFile: "memory.current", cacheKeys: []string{key, "inactive_file"}}
		if l, ok := (reader{fsys}).cgroupRoom(h, "/a", "/a"); !ok || l.Bytes < limit-used || l.Bytes > limit {
			t.Fatalf("%q, %q: room %+v, %v", b, key, l, ok)
		}
	})
}
