package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/gotron/gotron/train"
)

// interrupts handles SIGINT and SIGTERM for the whole command.
//
// Outside training the first signal cancels the command's context. During
// gotron train the first signal asks the ranks to stop after the current
// iteration (train.Stop), saving first when --save is given; the second
// exits at once with status 128+signal. A signal is never ignored and
// never turns into a collective's "context canceled".
type interrupts struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	stop   *train.Stop // set while training: stop after the iteration
	note   string      // what the first signal does, while training
	quiet  bool        // another process says it (an MPI rank but the first)
	first  syscall.Signal
}

// interruptsKey holds the handler in the command's context.
type interruptsKey struct{}

// interruptsFrom returns the handler watchSignals put in ctx (nil in
// tests that run a command without it).
func interruptsFrom(ctx context.Context) *interrupts {
	in, _ := ctx.Value(interruptsKey{}).(*interrupts)
	return in
}

// watchSignals returns the command's context, which carries the handler,
// and starts it.
func watchSignals() (context.Context, *interrupts) {
	ctx, cancel := context.WithCancel(context.Background())
	in := &interrupts{cancel: cancel}
	ctx = context.WithValue(ctx, interruptsKey{}, in)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range ch {
			in.handle(s.(syscall.Signal))
		}
	}()
	return ctx, in
}

// handle reacts to one signal.
func (in *interrupts) handle(s syscall.Signal) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.first != 0 {
		if !in.quiet {
			fmt.Fprintf(os.Stderr, "%sgotron: %s again: exiting at once; nothing after the last saved checkpoint is kept\n", lineStart(), name(s))
		}
		os.Exit(128 + int(s))
	}
	in.first = s
	if in.stop != nil {
		in.stop.Request(s)
		if !in.quiet {
			fmt.Fprintf(os.Stderr, "%sgotron: %s: %s; send it again to exit at once\n", lineStart(), name(s), in.note)
		}
		return
	}
	in.cancel()
}

// training switches the handler to stopping the ranks through stop; note
// says what that does ("finishing the iteration and saving to D"). quiet
// leaves the saying to another process: mpirun signals every rank, and
// the first says it for all.
func (in *interrupts) training(stop *train.Stop, note string, quiet bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stop, in.note, in.quiet = stop, note, quiet
	if in.first != 0 {
		stop.Request(in.first) // a signal that came during start-up
	}
}

// received returns the first signal (0: none).
func (in *interrupts) received() syscall.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.first
}

// lineStart ends a progress bar's line on a terminal.
func lineStart() string {
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return "\n"
	}
	return ""
}

// name returns "SIGINT", "SIGTERM" or the signal's number.
func name(s syscall.Signal) string { return (train.ExitReason{Signal: s}).String() }

// exitError ends the command with its status after printing its message;
// an empty message prints nothing (another process of the job said it).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// launcherRank is this process's rank in an mpirun job (Open MPI's
// OMPI_COMM_WORLD_RANK, or PMIx's PMIX_RANK), or -1 outside one.
func launcherRank() int {
	for _, k := range []string{"OMPI_COMM_WORLD_RANK", "PMIX_RANK"} {
		if v := os.Getenv(k); v != "" {
			if r, err := strconv.Atoi(v); err == nil {
				return r
			}
		}
	}
	return -1
}
