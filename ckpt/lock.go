package ckpt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// LockFile is the name of the lock a run holds on its checkpoint directory
// (LockDir).
const LockFile = "gotron.lock"

// Heartbeat is how often a held lock's file is touched, and StaleAfter
// how long a lock of another machine may go untouched before LockDir
// takes it over: the run that held it is taken to be gone.
const (
	Heartbeat  = time.Minute
	StaleAfter = 5 * Heartbeat
)

// Holder describes the process that holds, or last held, a lock.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s, started %s", h.PID, h.Host, h.Started.Format(time.DateTime))
}

// LockedError says that another run holds a checkpoint directory's lock.
type LockedError struct {
	Dir    string
	Holder Holder // zero when the lock file could not be read
	// Age is how long ago the holder last touched the lock.
	Age time.Duration
}

func (e *LockedError) Error() string {
	who := "another run"
	if e.Holder.PID != 0 {
		who = "another run (" + e.Holder.String() + ")"
	}
	msg := fmt.Sprintf("--save %s: %s is saving checkpoints there: wait for it to end, end it, or choose another --save directory", e.Dir, who)
	if host, _ := os.Hostname(); e.Holder.Host != host {
		// Another machine's run: its death cannot be seen from here.
		msg += fmt.Sprintf(" (if that run is gone, its lock %s is taken over once untouched for %v, or delete it)", filepath.Join(e.Dir, LockFile), StaleAfter)
	}
	return msg
}

// Lock is a held lock on a checkpoint directory: while a run holds it, no
// other run (in this process, on this machine, or on another machine
// sharing the directory) can take it, so two runs never write the same
// iterations over each other. Release it with Unlock.
type Lock struct {
	f    *os.File
	path string
	stop chan struct{}
	done chan struct{}
}

// LockDir takes the lock of the checkpoint directory dir (created if
// missing). The lock is the file dir/gotron.lock, holding its holder's
// pid, host and start time, with an exclusive flock on it for as long as
// the run lives; the kernel drops the flock when a process dies however
// it dies, and the holder touches the file every Heartbeat.
//
// A lock file whose flock is free belonged to a run that is gone: on this
// machine LockDir takes it over at once, and returns the former holder
// (for a note); a lock written by another machine is taken over once
// untouched for StaleAfter (a file system whose flocks do not reach other
// machines cannot say more), else LockDir returns a *LockedError naming
// the holder, as it does when the flock is held.
func LockDir(dir string) (*Lock, *Holder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, LockFile)
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	for range 8 { // a holder removing the file as we open it: try again
		f, err := openLocked(path)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil, lockedError(dir, path)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--save %s: locking: %w", dir, err)
		}
		if !samePath(f, path) {
			f.Close()
			continue
		}
		prev, err := takeOver(f, dir, host)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		me := Holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second)}
		if err := writeHolder(f, me); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("--save %s: writing the lock: %w", dir, err)
		}
		l := &Lock{f: f, path: path, stop: make(chan struct{}), done: make(chan struct{})}
		go l.heartbeat()
		return l, prev, nil
	}
	return nil, nil, fmt.Errorf("--save %s: the lock %s keeps changing: another run is starting or ending there", dir, path)
}

// openLocked opens (creating) path and takes an exclusive flock on it
// without waiting.
func openLocked(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// samePath reports whether f is still the file at path (a holder that
// unlocked removed it, and a new run may have created another).
func samePath(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// takeOver decides whether the flocked lock file f may be taken: empty
// (new), or its former holder gone. It returns the former holder, if any.
func takeOver(f *os.File, dir, host string) (*Holder, error) {
	h, age, ok := readHolder(f)
	if !ok {
		return nil, nil // new, or a lock interrupted while being written
	}
	if h.Host != host && age < StaleAfter {
		return nil, &LockedError{Dir: dir, Holder: h, Age: age}
	}
	return &h, nil
}

// lockedError describes the holder of the busy lock at path.
func lockedError(dir, path string) error {
	e := &LockedError{Dir: dir}
	if f, err := os.Open(path); err == nil {
		e.Holder, e.Age, _ = readHolder(f)
		f.Close()
	}
	return e
}

// readHolder reads a lock file's holder and how long ago it was touched.
func readHolder(f *os.File) (Holder, time.Duration, bool) {
	var h Holder
	st, err := f.Stat()
	if err != nil || st.Size() == 0 || st.Size() > 4096 {
		return h, 0, false
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil || json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return Holder{}, 0, false
	}
	return h, time.Since(st.ModTime()), true
}

// writeHolder replaces f's contents with h.
func writeHolder(f *os.File, h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}

// heartbeat touches the lock file every Heartbeat until Unlock.
func (l *Lock) heartbeat() {
	defer close(l.done)
	tick := time.NewTicker(Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case now := <-tick.C:
			os.Chtimes(l.path, now, now) // best effort: a miss only ages the lock
		}
	}
}

// Unlock releases the lock: the file is removed, then the flock dropped.
// Unlocking twice is a no-op.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	close(l.stop)
	<-l.done
	err := os.Remove(l.path)
	err = errors.Join(err, l.f.Close()) // closing drops the flock
	l.f = nil
	return err
}
