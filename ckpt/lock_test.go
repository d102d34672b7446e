package ckpt

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLockRefusesASecondHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "save") // created by LockDir
	l, prev, err := LockDir(dir)
	if err != nil || prev != nil {
		t.Fatalf("LockDir: %v, former holder %v", err, prev)
	}
	_, _, err = LockDir(dir)
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second LockDir: %v, want a *LockedError", err)
	}
	host, _ := os.Hostname()
	if le.Holder.PID != os.Getpid() || le.Holder.Host != host {
		t.Errorf("holder %+v, want pid %d on %s", le.Holder, os.Getpid(), host)
	}
	for _, want := range []string{"--save " + dir, "pid " + strconv.Itoa(os.Getpid()), host, "choose another --save"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("second Unlock: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, LockFile)); !os.IsNotExist(err) {
		t.Errorf("the lock file is still there after Unlock (%v)", err)
	}
	l, _, err = LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Unlock: %v", err)
	}
	l.Unlock()
}

// writeLock leaves a lock file of holder h, touched age ago, as a run that
// died would.
func writeLock(t *testing.T, dir string, h Holder, age time.Duration) {
	t.Helper()
	b, _ := json.Marshal(h)
	path := filepath.Join(dir, LockFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-age)
	if err := os.Chtimes(path, then, then); err != nil {
		t.Fatal(err)
	}
}

func TestLockTakesOverADeadRun(t *testing.T) {
	host, _ := os.Hostname()
	for _, c := range []struct {
		name   string
		holder Holder
		age    time.Duration
		taken  bool
	}{
		{"this machine, just now", Holder{PID: 4242, Host: host}, 0, true},
		{"another machine, silent", Holder{PID: 4242, Host: host + "-other"}, StaleAfter + time.Minute, true},
		{"another machine, alive", Holder{PID: 4242, Host: host + "-other"}, time.Minute, false},
	} {
		dir := t.TempDir()
		c.holder.Started = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		writeLock(t, dir, c.holder, c.age)
		l, prev, err := LockDir(dir)
		if !c.taken {
			var le *LockedError
			if !errors.As(err, &le) || le.Holder != c.holder || !strings.Contains(err.Error(), c.holder.Host) {
				t.Errorf("%s: LockDir: %v, want a *LockedError naming %+v", c.name, err, c.holder)
			}
			continue
		}
		if err != nil || prev == nil || *prev != c.holder {
			t.Errorf("%s: LockDir: %v, former holder %v, want %+v", c.name, err, prev, c.holder)
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, LockFile))
		var now Holder
		if json.Unmarshal(b, &now) != nil || now.PID != os.Getpid() {
			t.Errorf("%s: the lock holds %q after the take-over, want this process", c.name, b)
		}
		l.Unlock()
	}
}

func TestLockTakesAnUnreadableFile(t *testing.T) {
	for _, body := range []string{"", "{", `{"pid":0}`, strings.Repeat("x", 5000)} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, LockFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		l, prev, err := LockDir(dir)
		if err != nil || prev != nil {
			t.Errorf("lock file %.10q: LockDir %v, former holder %v; want it taken as new", body, err, prev)
			continue
		}
		l.Unlock()
	}
}

func TestLockDirThatCannotBeCreated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LockDir(filepath.Join(file, "save")); err == nil {
		t.Fatal("LockDir under a regular file succeeded")
	}
}

// FuzzLockFile: whatever a lock file holds, LockDir takes it or names its
// holder; it never panics.
func FuzzLockFile(f *testing.F) {
	host, _ := os.Hostname()
	for _, s := range []string{"", "{}", `{"pid":1,"host":"` + host + `","started":"2026-11-28T00:00:00Z"}`, `{"pid":7,"host":"elsewhere"}`, `{"pid":"x"}`, "\x00\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, LockFile), body, 0o644); err != nil {
			t.Fatal(err)
		}
		l, _, err := LockDir(dir)
		var le *LockedError
		if err != nil && !errors.As(err, &le) {
			t.Fatalf("LockDir: %v", err)
		}
		l.Unlock()
	})
}
