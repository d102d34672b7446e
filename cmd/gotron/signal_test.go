//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runMainEnv, set in a child's environment, makes the test binary run
// gotron's main with the arguments after "--".
const runMainEnv = "GOTRON_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"gotron"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is a `gotron train` process started by the test.
type child struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	err strings.Builder // stderr so far
	// lines receives every stderr line.
	lines chan string
	// read is done when both pipes have been read to their end.
	read sync.WaitGroup
}

// stderr returns what the child wrote to stderr so far.
func (c *child) stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err.String()
}

// waitFor returns once the child writes a stderr line containing s.
func (c *child) waitFor(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("the run ended without saying %q:\n%s", s, c.stderr())
			}
			if strings.Contains(l, s) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no %q before the deadline:\n%s", s, c.stderr())
		}
	}
}

// trainUntilRunning starts `gotron train args...` as a child process and
// returns once it has logged its first iteration.
func trainUntilRunning(t *testing.T, ctx context.Context, args ...string) *child {
	t.Helper()
	c := &child{lines: make(chan string, 100)}
	c.cmd = exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--", "train"}, args...)...)
	c.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.read.Add(2)
	go func() {
		defer c.read.Done()
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			c.mu.Lock()
			c.err.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
		close(c.lines)
	}()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), " iteration ") {
			go func() {
				defer c.read.Done()
				for sc.Scan() {
				}
			}()
			return c
		}
	}
	c.read.Done()
	c.read.Wait()
	c.cmd.Wait()
	t.Fatalf("the run ended before its first iteration:\n%s", c.stderr())
	return nil
}

// exitCode waits for the child (its output read to the end first, as
// exec.Cmd.Wait requires) and returns its exit status.
func (c *child) exitCode(t *testing.T) int {
	t.Helper()
	c.read.Wait()
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return c.cmd.ProcessState.ExitCode()
}

// TestSignals sends SIGTERM and SIGINT to training processes (two
// in-process ranks): with --exit-signal-handler the run finishes its
// iteration, saves and exits 0; without it, it saves and exits 128+signal
// with one line saying so; a second signal exits at once. No stack trace,
// no "context canceled".
func TestSignals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	flags := []string{"--mock-data", "--vocab-size", "64", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
		"--seq-length", "16", "--train-iters", "100000000", "--log-interval", "1", "--eval-iters", "0", "--world-size", "2"}
	for _, c := range []struct {
		name  string
		extra []string
		sigs  []syscall.Signal
		code  int
		want  []string
		saved bool
	}{
		{"handler", []string{"--exit-signal-handler"}, []syscall.Signal{syscall.SIGTERM}, 0, []string{"SIGTERM: finishing the iteration and saving"}, true},
		{"no handler", nil, []syscall.Signal{syscall.SIGINT}, 130, []string{"stopped by SIGINT after iteration", "resume with --load"}, true},
		// Iterations of about a second, so that the second signal, sent
		// right after the first, arrives before the iteration ends.
		{"twice", []string{"--hidden-size", "256", "--seq-length", "512", "--micro-batch-size", "8", "--max-position-embeddings", "512"},
			[]syscall.Signal{syscall.SIGINT, syscall.SIGINT}, 130, []string{"SIGINT again: exiting at once"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ckpt")
			p := trainUntilRunning(t, ctx, append(append(flags, "--save", dir), c.extra...)...)
			for i, s := range c.sigs {
				if i > 0 {
					// The kernel merges a signal into one still pending:
					// send the next once the first has been handled.
					p.waitFor(t, ctx, "send it again")
				}
				if err := p.cmd.Process.Signal(s); err != nil {
					t.Fatal(err)
				}
			}
			if code := p.exitCode(t); code != c.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, c.code, p.stderr())
			}
			msg := p.stderr()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr does not say %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, "goroutine ") || strings.Contains(msg, "context canceled") || strings.Contains(msg, "rank 1") {
				t.Errorf("stderr has a trace or a rank's error:\n%s", msg)
			}
			_, err := os.Stat(filepath.Join(dir, "latest_checkpointed_iteration.txt"))
			if c.saved && err != nil {
				t.Errorf("no checkpoint: %v", err)
			}
		})
	}
}
