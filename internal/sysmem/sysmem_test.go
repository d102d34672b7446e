package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAvailable(t *testing.T) {
	dir := t.TempDir()
	meminfo := write(t, dir, "meminfo", "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000000 kB\n")
	defer func(a, b, c string) { meminfoPath, cgroupMaxPath, cgroupCurPath = a, b, c }(meminfoPath, cgroupMaxPath, cgroupCurPath)
	meminfoPath, cgroupMaxPath, cgroupCurPath = meminfo, filepath.Join(dir, "none"), filepath.Join(dir, "none")
	if n, ok := Available(); !ok || n != 2000000*1024 {
		t.Fatalf("meminfo only: %d %v, want %d", n, ok, 2000000*1024)
	}
	cgroupMaxPath = write(t, dir, "max", "1073741824\n")
	cgroupCurPath = write(t, dir, "cur", "73741824\n")
	if n, ok := Available(); !ok || n != 1000000000 {
		t.Fatalf("cgroup below meminfo: %d %v, want 1000000000", n, ok)
	}
	cgroupMaxPath = write(t, dir, "max2", "max\n")
	if n, ok := Available(); !ok || n != 2000000*1024 {
		t.Fatalf("cgroup without a limit: %d %v", n, ok)
	}
	meminfoPath = write(t, dir, "bad", "MemAvailable: lots kB\n")
	if _, ok := Available(); ok {
		t.Fatal("a damaged meminfo was read")
	}
}

func TestAvailableOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	n, ok := Available()
	if !ok || n <= 0 {
		t.Fatalf("Available() = %d, %v on a machine with /proc/meminfo", n, ok)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{3 << 30: "3.0 GiB", 1536 << 20: "1.5 GiB", 512 << 20: "512.0 MiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
