//go:build mpi

package mpi

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// EXPERIMENTAL knobs (temporary)
var (
	pureFor      = time.Duration(0)
	spinFor      = 200 * time.Microsecond
	minSleep     = 20 * time.Microsecond
	maxSleep     = time.Millisecond
	div          = time.Duration(8)
	goschedEvery = time.Duration(0) // 0: every yield; <0 never
	doYield      = true
)

const timerFloor = time.Millisecond

func init() {
	for _, kv := range strings.Split(os.Getenv("GOTRON_POLL"), ",") {
		k, v, _ := strings.Cut(kv, "=")
		d, _ := time.ParseDuration(v)
		switch k {
		case "pure":
			pureFor = d
		case "spin":
			spinFor = d
		case "min":
			minSleep = d
		case "max":
			maxSleep = d
		case "div":
			n := 0
			for _, ch := range v {
				n = n*10 + int(ch-'0')
			}
			div = time.Duration(n)
		case "gosched":
			goschedEvery = d
		case "yield":
			doYield = v == "1"
		}
	}
}

func backoff(elapsed time.Duration) time.Duration {
	if elapsed < pureFor {
		return -1
	}
	if elapsed < spinFor {
		return 0
	}
	return min(max(elapsed/div, minSleep), maxSleep)
}

type sleeper struct {
	t    *time.Timer
	last time.Time
}

func (s *sleeper) sleep(d time.Duration, a, b, c <-chan struct{}) bool {
	if d < timerFloor {
		if d < 0 {
		} else if d == 0 {
			if goschedEvery == 0 {
				runtime.Gosched()
			} else if goschedEvery > 0 {
				now := time.Now()
				if now.Sub(s.last) >= goschedEvery {
					s.last = now
					runtime.Gosched()
				}
			}
			if doYield {
				syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
			}
		} else {
			ts := syscall.NsecToTimespec(int64(d))
			syscall.Nanosleep(&ts, nil)
		}
		select {
		case <-a:
			return true
		case <-b:
			return true
		case <-c:
			return true
		default:
			return false
		}
	}
	if s.t == nil {
		s.t = time.NewTimer(d)
	} else {
		s.t.Reset(d)
	}
	select {
	case <-a:
	case <-b:
	case <-c:
	case <-s.t.C:
		return false
	}
	s.t.Stop()
	return true
}
