package sysmem

import (
	"bytes"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// noLimit: a limit of 2⁶² bytes or more is none. cgroup v1 writes its
// "unlimited" as LONG_MAX rounded down to pages, 9223372036854771712.
const noLimit = 1 << 62

// hierarchy names one cgroup version's mount and files.
type hierarchy struct {
	name          string // "cgroup v2", in Limit.Source
	fstype        string // mountinfo's filesystem type: "cgroup2", "cgroup"
	option        string // a super option the mount must have ("memory" for v1), or ""
	limitFile     string // "memory.max", "memory.limit_in_bytes"
	usageFile     string // "memory.current", "memory.usage_in_bytes"
	hierarchyFile string // v1's "memory.use_hierarchy": "0" in a parent ends the walk
	// cacheKeys are memory.stat's keys of the page cache the kernel can
	// reclaim, the first found counting: v2's "inactive_file", v1's
	// hierarchical "total_inactive_file" then the group's own "inactive_file".
	cacheKeys []string
}

// cgroupLimits lists the room under the limit of cgroup p (a path of
// /proc/self/cgroup) and of each of its parents up to h's mount's root,
// the process's own group first.
func (r reader) cgroupLimits(h hierarchy, mounts []mount, p string) []Limit {
	m, rel, ok := h.place(mounts, p)
	if !ok {
		return nil
	}
	if st, err := fs.Stat(r.fsys, fsPath(m.point, rel)); err != nil || !st.IsDir() {
		rel = "/" // not under the mount: read the mount's root
	}
	var out []Limit
	for {
		if l, ok := r.cgroupRoom(h, path.Join(m.point, rel), path.Join(m.root, rel)); ok {
			out = append(out, l)
		}
		if rel == "/" {
			return out
		}
		rel = path.Dir(rel)
		if h.hierarchyFile != "" && strings.TrimSpace(string(r.read(fsPath(m.point, rel, h.hierarchyFile)))) == "0" {
			return out // the parent does not count its children's memory
		}
	}
}

// cgroupRoom returns the room under the limit of the group in directory
// dir, named name, if it has one: the limit less the working set (the
// usage without its reclaimable page cache), at least 0.
func (r reader) cgroupRoom(h hierarchy, dir, name string) (Limit, bool) {
	limit, ok := parseBytes(r.read(fsPath(dir, h.limitFile)))
	if !ok || limit >= noLimit {
		return Limit{}, false
	}
	source := h.name + " " + h.limitFile + " of " + name + ": " + Format(limit)
	used, ok := parseBytes(r.read(fsPath(dir, h.usageFile)))
	if !ok || used >= noLimit {
		return Limit{Bytes: limit, Source: source + ", usage unknown"}, true
	}
	cache := min(r.pageCache(h, dir), used)
	source += ", " + Format(used-cache) + " in use"
	if cache > 0 {
		source += " (" + Format(cache) + " page cache not counted)"
	}
	return Limit{Bytes: max(limit-(used-cache), 0), Source: source}, true
}

// pageCache returns the reclaimable page cache that the usage of the group
// in directory dir counts, from its memory.stat; 0 if that cannot be read.
func (r reader) pageCache(h hierarchy, dir string) int64 {
	stat := r.read(fsPath(dir, "memory.stat"))
	for _, key := range h.cacheKeys {
		if n, ok := parseMemoryStat(stat, key); ok {
			return n
		}
	}
	return 0
}

// parseMemoryStat returns the value of key's first line of a memory.stat
// ("inactive_file 1073741824"), if it is a count of at least 0.
func parseMemoryStat(b []byte, key string) (int64, bool) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) != 2 || f[0] != key {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		return n, err == nil && n >= 0
	}
	return 0, false
}

// place finds h's mount holding cgroup p: the first whose root is p or a
// parent of it, with rel the rest of p ("/" for the mount's root). A group
// no mount reaches (under a cgroup namespace, "/../..") is the first
// mount's root. ok is false without a mount of h.
func (h hierarchy) place(mounts []mount, p string) (m mount, rel string, ok bool) {
	var first *mount
	for i, m := range mounts {
		if m.fstype != h.fstype || h.option != "" && !slices.Contains(strings.Split(m.options, ","), h.option) {
			continue
		}
		if first == nil {
			first = &mounts[i]
		}
		if rel, ok := under(p, m.root); ok {
			return m, rel, true
		}
	}
	if first == nil {
		return mount{}, "", false
	}
	return *first, "/", true
}

// under returns p relative to root ("/" when they are the same) if p is
// root or below it. A relative p, or one with "..", is below no root.
func under(p, root string) (string, bool) {
	if !strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
		return "", false
	}
	p = path.Clean(p)
	switch {
	case root == "/":
		return p, true
	case p == root:
		return "/", true
	case strings.HasPrefix(p, root+"/"):
		return p[len(root):], true
	}
	return "", false
}

// fsPath joins absolute path elements into an fs.FS path.
func fsPath(elem ...string) string {
	p := strings.TrimPrefix(path.Join(elem...), "/")
	if p == "" {
		return "."
	}
	return p
}

// procCgroup is the process's place in the hierarchies, from
// /proc/self/cgroup: v2 from the "0::/path" line, v1 from the line whose
// controllers include memory ("4:memory:/path"); "" where there is none.
type procCgroup struct{ v2, v1 string }

// parseCgroup reads /proc/self/cgroup, whose lines are
// hierarchy-ID:controller-list:cgroup-path (man 7 cgroups). Lines that do
// not have that form or whose path is not absolute are passed over.
func parseCgroup(b []byte) procCgroup {
	var p procCgroup
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		id, rest, ok := strings.Cut(string(line), ":")
		if !ok {
			continue
		}
		controllers, cg, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(cg, "/") {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			p.v2 = cg
		case slices.Contains(strings.Split(controllers, ","), "memory"):
			p.v1 = cg
		}
	}
	return p
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	root    string // (4) the mount's root within its filesystem: a cgroup path
	point   string // (5) where it is mounted
	fstype  string // (9) "cgroup2", "cgroup"
	options string // (11) super options: "rw,memory"
}

// parseMountinfo reads /proc/self/mountinfo (man 5 proc_pid_mountinfo):
//
//	35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
//	(1)(2) (3) (4)       (5)             (6)  (7)(8) (9)  (10)    (11)
//
// (7) is zero or more optional fields, ended by the "-" of (8). Lines of
// another shape, or whose paths are not absolute, are passed over.
func parseMountinfo(b []byte) []mount {
	var out []mount
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		f := strings.Fields(string(line))
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			continue
		}
		m := mount{root: unescape(f[3]), point: unescape(f[4]), fstype: f[sep+1], options: f[sep+3]}
		if strings.HasPrefix(m.root, "/") && strings.HasPrefix(m.point, "/") {
			out = append(out, m)
		}
	}
	return out
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash in paths ("\040" is a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }
