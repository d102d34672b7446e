//go:build mpi

package mpi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gotron/gotron/comm"
)

// A failure notice carries the failed rank's error across processes as
// data: its text, the texts of the errors it wraps (so that errors.Is
// matches sentinel errors, which have the same text in every process of one
// program), and the first error of its chain that is one of comm's error
// types or *comm.PanicError, field by field (so that errors.As finds it on every
// rank).

const (
	maxTexts   = 32
	maxTextLen = 512
)

// RemoteError is the error of a rank in another process, rebuilt from a
// failure notice.
type RemoteError struct {
	Rank int    // world rank of the process whose error it is
	Msg  string // its text
	// Texts are the texts of the errors it wraps, outermost first (those
	// longer than 512 bytes left out).
	Texts []string
	// Err is the first error of its chain that is a *comm.TimeoutError,
	// *comm.PeerError, *comm.MismatchError, *comm.ArgError or *comm.PanicError,
	// rebuilt field by field (errors held inside it are RemoteErrors), or
	// nil.
	Err error
}

func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns Err.
func (e *RemoteError) Unwrap() error { return e.Err }

// Is reports whether target's text is that of the remote error or of an
// error it wraps: errors.Is(err, ErrSentinel) holds across processes as it
// does within one.
func (e *RemoteError) Is(target error) bool {
	if target == nil {
		return false
	}
	t := target.Error()
	return t == e.Msg || slices.Contains(e.Texts, t)
}

// wireError is an error as a notice carries it.
type wireError struct {
	Msg      string              `json:"m"`
	Texts    []string            `json:"x,omitempty"`
	Timeout  *wireTimeout        `json:"to,omitempty"`
	Peer     *wirePeer           `json:"pe,omitempty"`
	Mismatch *comm.MismatchError `json:"mm,omitempty"`
	Arg      *comm.ArgError      `json:"ae,omitempty"`
	Panic    *wirePanic          `json:"pa,omitempty"`
}

type wireTimeout struct {
	Group       string
	GlobalRanks []int
	Rank        int
	GlobalRank  int
	Op          string
	Seq         uint64
	Peer        int
	Waited      time.Duration
	Cause       string // "timeout", "deadline", "canceled", or a text
	Members     []wireMember
}

type wireMember struct {
	Rank       int
	GlobalRank int
	Status     comm.MemberStatus
	LastOp     string
	LastSeq    uint64
	Doing      string
	Err        string
}

type wirePeer struct {
	FailedRank int
	Cause      string
	Group      string
	GlobalRank int
	Op         string
	Seq        uint64
}

type wirePanic struct {
	Rank  int
	Value string
	Stack string
}

// chain returns err and every error it wraps, depth first.
func chain(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if e == nil || len(out) >= 4*maxTexts {
			return
		}
		out = append(out, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

func causeName(err error) string {
	switch {
	case errors.Is(err, comm.ErrTimeout):
		return "timeout"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case err == nil:
		return ""
	}
	return err.Error()
}

func causeOfName(rank int, s string) error {
	switch s {
	case "timeout":
		return comm.ErrTimeout
	case "deadline":
		return context.DeadlineExceeded
	case "canceled":
		return context.Canceled
	case "":
		return nil
	}
	return &RemoteError{Rank: rank, Msg: s}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// encodeError describes err for a notice.
func encodeError(err error) *wireError {
	if re, ok := err.(*RemoteError); ok {
		// Passed on: keep the texts of the original chain.
		w := &wireError{}
		if re.Err != nil {
			w = encodeError(re.Err)
		}
		w.Msg, w.Texts = re.Msg, re.Texts
		return w
	}
	w := &wireError{Msg: err.Error()}
	typed := false
	for _, e := range chain(err)[1:] {
		if t := e.Error(); len(t) <= maxTextLen && len(w.Texts) < maxTexts {
			w.Texts = append(w.Texts, t)
		}
	}
	for _, e := range chain(err) {
		if typed {
			break
		}
		typed = true
		switch x := e.(type) {
		case *comm.TimeoutError:
			t := &wireTimeout{Group: x.Group, GlobalRanks: x.GlobalRanks, Rank: x.Rank, GlobalRank: x.GlobalRank,
				Op: x.Op, Seq: x.Seq, Peer: x.Peer, Waited: x.Waited, Cause: causeName(x.Cause)}
			for _, m := range x.Members {
				t.Members = append(t.Members, wireMember{Rank: m.Rank, GlobalRank: m.GlobalRank, Status: m.Status,
					LastOp: m.LastOp, LastSeq: m.LastSeq, Doing: m.Doing, Err: errText(m.Err)})
			}
			w.Timeout = t
		case *comm.PeerError:
			w.Peer = &wirePeer{FailedRank: x.FailedRank, Cause: errText(x.Cause), Group: x.Group,
				GlobalRank: x.GlobalRank, Op: x.Op, Seq: x.Seq}
		case *comm.MismatchError:
			w.Mismatch = x
		case *comm.ArgError:
			w.Arg = x
		case *comm.PanicError:
			w.Panic = &wirePanic{Rank: x.Rank, Value: fmtValue(x.Value), Stack: string(x.Stack)}
		default:
			typed = false
		}
	}
	return w
}

func fmtValue(v any) string { return fmt.Sprint(v) }

// fit shrinks w until its encoding fits in limit bytes, cutting long texts
// first and the typed error last.
func (w *wireError) fit(limit int) {
	cut := func(s string, n int) string {
		if len(s) <= n {
			return s
		}
		return s[:n] + " …(cut)"
	}
	for step := 0; step < 4; step++ {
		if b, _ := json.Marshal(w); len(b) <= limit {
			return
		}
		switch step {
		case 0:
			w.Texts = nil
			w.Msg = cut(w.Msg, limit/4)
			if w.Panic != nil {
				w.Panic.Stack = cut(w.Panic.Stack, limit/4)
			}
		case 1:
			if w.Timeout != nil && len(w.Timeout.Members) > 64 {
				w.Timeout.Members = w.Timeout.Members[:64]
			}
		case 2:
			w.Timeout, w.Peer, w.Mismatch, w.Arg, w.Panic = nil, nil, nil, nil, nil
		case 3:
			w.Msg = cut(w.Msg, limit/8)
		}
	}
}

// decode rebuilds the error of world rank rank.
func (w *wireError) decode(rank int) *RemoteError {
	e := &RemoteError{Rank: rank, Msg: w.Msg, Texts: w.Texts}
	switch {
	case w.Timeout != nil:
		t := w.Timeout
		te := &comm.TimeoutError{Group: t.Group, GlobalRanks: t.GlobalRanks, Rank: t.Rank, GlobalRank: t.GlobalRank,
			Op: t.Op, Seq: t.Seq, Peer: t.Peer, Waited: t.Waited, Cause: causeOfName(rank, t.Cause)}
		for _, m := range t.Members {
			ms := comm.MemberState{Rank: m.Rank, GlobalRank: m.GlobalRank, Status: m.Status,
				LastOp: m.LastOp, LastSeq: m.LastSeq, Doing: m.Doing}
			if m.Err != "" {
				ms.Err = &RemoteError{Rank: m.GlobalRank, Msg: m.Err}
			}
			te.Members = append(te.Members, ms)
		}
		e.Err = te
	case w.Peer != nil:
		p := w.Peer
		e.Err = &comm.PeerError{FailedRank: p.FailedRank, Cause: &RemoteError{Rank: p.FailedRank, Msg: p.Cause},
			Group: p.Group, GlobalRank: p.GlobalRank, Op: p.Op, Seq: p.Seq}
	case w.Mismatch != nil:
		e.Err = w.Mismatch
	case w.Arg != nil:
		e.Err = w.Arg
	case w.Panic != nil:
		e.Err = &comm.PanicError{Rank: w.Panic.Rank, Value: w.Panic.Value, Stack: []byte(w.Panic.Stack)}
	}
	return e
}
