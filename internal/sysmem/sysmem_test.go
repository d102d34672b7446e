package sysmem

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// The files of a machine's tree, by fs.FS path.
const (
	cgroupFile    = "proc/self/cgroup"
	mountinfoFile = "proc/self/mountinfo"
	meminfoFile   = "proc/meminfo"
)

// Mount tables: a cgroup v2 only machine, and a v1 one as this package's
// author's machine has (v1 controllers and an empty v2 "unified" mount).
const (
	v2Mounts = "22 1 0:21 / / rw - ext4 /dev/vda rw\n" +
		"31 22 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	v1Mounts = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	v1Self = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
	// v1's "no limit": LONG_MAX rounded down to 4 KiB pages.
	v1Unlimited = "9223372036854771712\n"
	meminfo     = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20971520 kB\n" // 20 GiB
)

const gib = 1 << 30

// machine builds a fake root from file paths and contents; a path ending
// in "/" is a directory.
func machine(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, text := range files {
		if dir, ok := strings.CutSuffix(name, "/"); ok {
			m[dir] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
			continue
		}
		m[name] = &fstest.MapFile{Data: []byte(text), Mode: 0o444}
	}
	return m
}

// check asserts the smallest room on the fake machine and its source.
func check(t *testing.T, fsys fs.FS, bytes int64, source string) {
	t.Helper()
	got, ok := reader{fsys}.available()
	if !ok || got.Bytes != bytes || got.Source != source {
		t.Errorf("available() = %d %q, %v\nwant %d %q", got.Bytes, got.Source, ok, bytes, source)
	}
}

func TestCgroupV2Root(t *testing.T) {
	files := map[string]string{cgroupFile: "0::/\n", mountinfoFile: v2Mounts, meminfoFile: meminfo,
		"sys/fs/cgroup/cgroup.controllers": "cpu io memory pids\n"}
	// A host's root group has no memory.max: MemAvailable decides.
	check(t, machine(files), 20*gib, "MemAvailable of /proc/meminfo")
	files["sys/fs/cgroup/memory.max"] = "2147483648\n"
	files["sys/fs/cgroup/memory.current"] = "536870912\n"
	check(t, machine(files), 1536<<20, "cgroup v2 memory.max of /: 2.0 GiB, 512.0 MiB in use")
	files["sys/fs/cgroup/memory.max"] = "max\n"
	check(t, machine(files), 20*gib, "MemAvailable of /proc/meminfo")
}

// TestCgroupV2Nested: the smallest room of the process's group and its
// parents, "max" in between.
func TestCgroupV2Nested(t *testing.T) {
	const dir = "sys/fs/cgroup/user.slice/user-1000.slice/job.scope/"
	files := map[string]string{
		cgroupFile: "0::/user.slice/user-1000.slice/job.scope\n", mountinfoFile: v2Mounts, meminfoFile: meminfo,
		"sys/fs/cgroup/user.slice/memory.max":                     "8589934592\n", // 8 GiB
		"sys/fs/cgroup/user.slice/memory.current":                 "2147483648\n", // 2 GiB
		"sys/fs/cgroup/user.slice/user-1000.slice/memory.max":     "max\n",
		"sys/fs/cgroup/user.slice/user-1000.slice/memory.current": "2147483648\n",
		dir + "memory.max":     "3221225472\n", // 3 GiB
		dir + "memory.current": "2684354560\n", // 2.5 GiB
	}
	check(t, machine(files), 512<<20, "cgroup v2 memory.max of /user.slice/user-1000.slice/job.scope: 3.0 GiB, 2.5 GiB in use")
	// The parent tighter than the child.
	files["sys/fs/cgroup/user.slice/memory.current"] = "8321499136\n" // 7.75 GiB
	check(t, machine(files), 256<<20, "cgroup v2 memory.max of /user.slice: 8.0 GiB, 7.8 GiB in use")
	// A usage above the limit (the kernel reclaims) leaves no room.
	files[dir+"memory.current"] = "3300000000\n"
	check(t, machine(files), 0, "cgroup v2 memory.max of /user.slice/user-1000.slice/job.scope: 3.0 GiB, 3.1 GiB in use")
}

// TestCgroupV2Namespace: in a container with its own cgroup namespace the
// process is at "/" and the namespace's root has the container's limit; a
// process moved out of the namespace ("/../..") and a group missing from
// the mount are read at the mount's root; a mount of a subtree (a
// container without a namespace) is found by its root.
func TestCgroupV2Namespace(t *testing.T) {
	files := map[string]string{cgroupFile: "0::/\n", mountinfoFile: v2Mounts, meminfoFile: meminfo,
		"sys/fs/cgroup/memory.max": "1073741824\n", "sys/fs/cgroup/memory.current": "104857600\n"}
	const want = "cgroup v2 memory.max of /: 1.0 GiB, 100.0 MiB in use"
	check(t, machine(files), 1<<30-100<<20, want)
	files[cgroupFile] = "0::/../../init.scope\n"
	check(t, machine(files), 1<<30-100<<20, want)
	files[cgroupFile] = "0::/gone\n"
	check(t, machine(files), 1<<30-100<<20, want)

	files = map[string]string{cgroupFile: "0::/docker/abc/app\n", meminfoFile: meminfo,
		mountinfoFile:                      "40 31 0:38 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n",
		"sys/fs/cgroup/memory.max":         "4294967296\n",
		"sys/fs/cgroup/memory.current":     "0\n",
		"sys/fs/cgroup/app/memory.max":     "2147483648\n",
		"sys/fs/cgroup/app/memory.current": "1073741824\n",
	}
	check(t, machine(files), 1<<30, "cgroup v2 memory.max of /docker/abc/app: 2.0 GiB, 1.0 GiB in use")
}

// TestCgroupV1: this machine's layout, v1 memory controller beside an empty
// v2 mount (hybrid), with the limit on the process's group, on a parent
// only, on none, and on a parent that does not count its children.
func TestCgroupV1(t *testing.T) {
	const parent, dir = "sys/fs/cgroup/memory/process_api/", "sys/fs/cgroup/memory/process_api/abc/"
	files := map[string]string{cgroupFile: v1Self, mountinfoFile: v1Mounts, meminfoFile: meminfo,
		"sys/fs/cgroup/unified/cgroup.procs":         "1\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes": v1Unlimited, "sys/fs/cgroup/memory/memory.usage_in_bytes": "9000000000\n",
		"sys/fs/cgroup/memory/memory.use_hierarchy": "1\n",
		parent + "memory.limit_in_bytes":            v1Unlimited, parent + "memory.usage_in_bytes": "300000000\n",
		parent + "memory.use_hierarchy": "1\n",
		dir + "memory.limit_in_bytes":   "1610612736\n", dir + "memory.usage_in_bytes": "214748364\n",
		dir + "memory.use_hierarchy": "1\n",
	}
	check(t, machine(files), 1610612736-214748364, "cgroup v1 memory.limit_in_bytes of /process_api/abc: 1.5 GiB, 204.8 MiB in use")

	files[dir+"memory.limit_in_bytes"] = v1Unlimited
	files[parent+"memory.limit_in_bytes"] = "1073741824\n"
	check(t, machine(files), 1<<30-300000000, "cgroup v1 memory.limit_in_bytes of /process_api: 1.0 GiB, 286.1 MiB in use")

	files[parent+"memory.use_hierarchy"] = "0\n"
	check(t, machine(files), 20*gib, "MemAvailable of /proc/meminfo")

	files[parent+"memory.limit_in_bytes"] = v1Unlimited
	files[parent+"memory.use_hierarchy"] = "1\n"
	check(t, machine(files), 20*gib, "MemAvailable of /proc/meminfo")
	files[dir+"memory.limit_in_bytes"] = "4611686018427387904\n" // 2⁶²: none
	check(t, machine(files), 20*gib, "MemAvailable of /proc/meminfo")
}

// TestCgroupV1Namespace: a v1 group missing from the mount (a namespace,
// or a mount of the container's own group) is read at the mount's root.
func TestCgroupV1Namespace(t *testing.T) {
	files := map[string]string{cgroupFile: v1Self, mountinfoFile: v1Mounts, meminfoFile: meminfo,
		"sys/fs/cgroup/memory/memory.limit_in_bytes": "3221225472\n", "sys/fs/cgroup/memory/memory.usage_in_bytes": "1073741824\n"}
	check(t, machine(files), 2*gib, "cgroup v1 memory.limit_in_bytes of /: 3.0 GiB, 1.0 GiB in use")
	files[mountinfoFile] = "35 31 0:32 /process_api/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n"
	check(t, machine(files), 2*gib, "cgroup v1 memory.limit_in_bytes of /process_api/abc: 3.0 GiB, 1.0 GiB in use")
}

// v2Stat and v1Stat are memory.stat files, cut short: v2's inactive_file
// is 1 GiB; v1's is 256 MiB in the group itself and 512 MiB with its
// children (total_inactive_file).
const (
	v2Stat = "anon 268435456\nfile 1342177280\nkernel 8388608\nactive_anon 0\ninactive_anon 268435456\n" +
		"active_file 268435456\ninactive_file 1073741824\nunevictable 0\n"
	v1Stat = "cache 805306368\nrss 268435456\nactive_file 134217728\ninactive_file 268435456\n" +
		"hierarchical_memory_limit 1610612736\ntotal_cache 805306368\ntotal_rss 268435456\n" +
		"total_active_file 134217728\ntotal_inactive_file 536870912\n"
)

// TestCgroupV2PageCache: memory.stat's inactive_file is room, not usage,
// and never takes the usage below 0.
func TestCgroupV2PageCache(t *testing.T) {
	files := map[string]string{cgroupFile: "0::/\n", mountinfoFile: v2Mounts, meminfoFile: meminfo,
		"sys/fs/cgroup/memory.max": "2147483648\n", "sys/fs/cgroup/memory.current": "1610612736\n"} // 2, 1.5 GiB
	check(t, machine(files), 512<<20, "cgroup v2 memory.max of /: 2.0 GiB, 1.5 GiB in use")
	files["sys/fs/cgroup/memory.stat"] = v2Stat
	check(t, machine(files), 1536<<20, "cgroup v2 memory.max of /: 2.0 GiB, 512.0 MiB in use (1.0 GiB page cache not counted)")
	// Read a moment apart, the cache may exceed the usage.
	files["sys/fs/cgroup/memory.current"] = "536870912\n"
	check(t, machine(files), 2*gib, "cgroup v2 memory.max of /: 2.0 GiB, 0.0 MiB in use (512.0 MiB page cache not counted)")
	// No inactive file cache: nothing is said of it.
	files["sys/fs/cgroup/memory.stat"] = "anon 1\ninactive_file 0\n"
	check(t, machine(files), 1536<<20, "cgroup v2 memory.max of /: 2.0 GiB, 512.0 MiB in use")
}

// TestCgroupV1PageCache: v1 takes the hierarchical total_inactive_file,
// which its hierarchical usage counts, else the group's own inactive_file.
func TestCgroupV1PageCache(t *testing.T) {
	const dir = "sys/fs/cgroup/memory/process_api/abc/"
	files := map[string]string{cgroupFile: v1Self, mountinfoFile: v1Mounts, meminfoFile: meminfo,
		dir + "memory.limit_in_bytes": "1610612736\n", dir + "memory.usage_in_bytes": "1073741824\n", // 1.5, 1 GiB
		dir + "memory.stat": v1Stat}
	const source = "cgroup v1 memory.limit_in_bytes of /process_api/abc: 1.5 GiB, "
	check(t, machine(files), 1<<30, source+"512.0 MiB in use (512.0 MiB page cache not counted)")
	files[dir+"memory.stat"] = strings.ReplaceAll(v1Stat, "total_inactive_file", "total_x")
	check(t, machine(files), 768<<20, source+"768.0 MiB in use (256.0 MiB page cache not counted)")
	files[dir+"memory.stat"] = strings.ReplaceAll(v1Stat, "total_inactive_file 536870912", "total_inactive_file ?")
	check(t, machine(files), 768<<20, source+"768.0 MiB in use (256.0 MiB page cache not counted)")
	delete(files, dir+"memory.stat")
	check(t, machine(files), 512<<20, source+"1.0 GiB in use")
}

// TestMemoryStatGarbage: a memory.stat that is missing, a directory or
// garbled leaves the whole usage counted.
func TestMemoryStatGarbage(t *testing.T) {
	const dir = "sys/fs/cgroup/a/"
	for name, stat := range map[string]string{
		"directory":     "/",
		"empty":         "",
		"value garbled": "inactive_file lots\n",
		"negative":      "inactive_file -1\n",
		"too big":       "inactive_file 99999999999999999999\n",
		"no value":      "inactive_file\ninactive_file 1 kB\n",
		"other keys":    "inactive_file: 1073741824\nInactive_file 1073741824\ntotal_inactive_file 1073741824\n",
		"binary":        "\x00\xff inactive_file\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{cgroupFile: "0::/a\n", mountinfoFile: v2Mounts, meminfoFile: meminfo,
				dir + "memory.max": "2147483648\n", dir + "memory.current": "1610612736\n"}
			if stat == "/" {
				files[dir+"memory.stat/"] = "" // a directory
			} else {
				files[dir+"memory.stat"] = stat
			}
			check(t, machine(files), 512<<20, "cgroup v2 memory.max of /a: 2.0 GiB, 1.5 GiB in use")
		})
	}
}

func TestParseMemoryStat(t *testing.T) {
	for _, c := range []struct {
		stat, key string
		n         int64
		ok        bool
	}{
		{v2Stat, "inactive_file", 1 << 30, true},
		{v1Stat, "total_inactive_file", 512 << 20, true},
		{v1Stat, "inactive_file", 256 << 20, true},
		{"inactive_file 5\ninactive_file 6\n", "inactive_file", 5, true},
		{" inactive_file\t7 \r\n", "inactive_file", 7, true},
		{v2Stat, "total_inactive_file", 0, false},
		{"inactive_file x\n", "inactive_file", 0, false},
		{"", "inactive_file", 0, false},
	} {
		if n, ok := parseMemoryStat([]byte(c.stat), c.key); n != c.n && c.ok || ok != c.ok {
			t.Errorf("parseMemoryStat(%q, %q) = %d, %v, want %d, %v", c.stat, c.key, n, ok, c.n, c.ok)
		}
	}
}

// TestMeminfoSmallerThanCgroup: MemAvailable below the cgroups' room wins.
func TestMeminfoSmallerThanCgroup(t *testing.T) {
	files := map[string]string{cgroupFile: v1Self, mountinfoFile: v1Mounts,
		meminfoFile: "MemTotal: 4000000 kB\nMemAvailable:   1048576 kB\n",
		"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "8589934592\n",
		"sys/fs/cgroup/memory/process_api/abc/memory.usage_in_bytes": "0\n"}
	check(t, machine(files), 1<<30, "MemAvailable of /proc/meminfo")
}

// TestGarbageIgnored: files that are missing, directories or garbled are
// passed over, without a panic.
func TestGarbageIgnored(t *testing.T) {
	const dir = "sys/fs/cgroup/a/"
	for name, files := range map[string]map[string]string{
		"limit garbled":   {dir + "memory.max": "lots\n", dir + "memory.current": "1\n"},
		"limit negative":  {dir + "memory.max": "-1\n"},
		"limit empty":     {dir + "memory.max": ""},
		"limit directory": {dir + "memory.max/": ""},
		"cgroup garbled":  {cgroupFile: "0:/a\nx\n::::\n0::a\n", dir + "memory.max": "1\n"},
		"cgroup missing":  {cgroupFile + "/": "", dir + "memory.max": "1\n"},
		"mounts garbled":  {mountinfoFile: "31 22 0:27 / /sys/fs/cgroup - cgroup2\n- - - -\n\x00\n", dir + "memory.max": "1\n"},
		"mount relative":  {mountinfoFile: "31 22 0:27 / sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", dir + "memory.max": "1\n"},
		"no v2 mount":     {mountinfoFile: v1Mounts, dir + "memory.max": "1\n"},
	} {
		t.Run(name, func(t *testing.T) {
			all := map[string]string{cgroupFile: "0::/a\n", mountinfoFile: v2Mounts, meminfoFile: meminfo}
			for k, v := range files {
				delete(all, strings.TrimSuffix(k, "/")) // a directory in a file's place
				all[k] = v
			}
			check(t, machine(all), 20*gib, "MemAvailable of /proc/meminfo")
		})
	}
	// An unreadable usage leaves the limit itself as the room.
	check(t, machine(map[string]string{cgroupFile: "0::/a\n", mountinfoFile: v2Mounts, meminfoFile: meminfo,
		dir + "memory.max": "1073741824\n", dir + "memory.current": "many\n"}),
		1<<30, "cgroup v2 memory.max of /a: 1.0 GiB, usage unknown")
	// Nothing readable: no reading at all.
	if l, ok := (reader{machine(map[string]string{meminfoFile: "MemAvailable: lots kB\n"})}).available(); ok {
		t.Errorf("a garbled meminfo gave %+v", l)
	}
}

// TestOnDisk reads a v1 tree written to a temporary directory, as
// Available reads the machine's own root.
func TestOnDisk(t *testing.T) {
	root := t.TempDir()
	for name, text := range map[string]string{cgroupFile: v1Self, mountinfoFile: v1Mounts, meminfoFile: meminfo,
		"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "1610612736\n",
		"sys/fs/cgroup/memory/process_api/abc/memory.usage_in_bytes": "0\n"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check(t, os.DirFS(root), 1610612736, "cgroup v1 memory.limit_in_bytes of /process_api/abc: 1.5 GiB, 0.0 MiB in use")
}

// TestAvailableOnThisMachine logs what this machine reports (go test -v).
func TestAvailableOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	l, ok := Available()
	if !ok || l.Bytes <= 0 || l.Source == "" {
		t.Fatalf("Available() = %+v, %v on a machine with /proc/meminfo", l, ok)
	}
	t.Logf("%s available: %s", Format(l.Bytes), l.Source)
	for _, l := range (reader{os.DirFS("/")}).limits() {
		t.Logf("  %s (%d bytes): %s", Format(l.Bytes), l.Bytes, l.Source)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{3 << 30: "3.0 GiB", 1536 << 20: "1.5 GiB", 512 << 20: "512.0 MiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/a\011\012\134`: "/a\t\n\\", `/a\`: `/a\`, `/a\08`: `/a\08`, `/\400`: `/\400`} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
