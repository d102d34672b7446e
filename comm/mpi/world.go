//go:build mpi

package mpi

import (
	"context"
	"errors"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gotron/gotron/comm"
)

// World is this process's member of a world of MPI processes (every
// process of MPI_COMM_WORLD, one rank each): the Go form of a
// torch.distributed default process group under mpirun or srun.
//
// A World is a failure domain of its own, over its own duplicates of
// MPI_COMM_WORLD: a rank that fails in one World's Run makes that World's
// calls on every rank return *comm.PeerErrors, and leaves other Worlds
// alone. Build it with NewWorld on every process, run it once with Run,
// then Close it.
type World struct {
	timeout time.Duration // 0: no bound
	rank    int
	size    int
	tagUB   int
	busy    time.Duration // how long a wait polls MPI without pausing (poll.go)
	ctl     mpiComm       // notices, status queries and the exit agreement
	world   *group

	stop    chan struct{}
	stopped chan struct{}
	reapers sync.WaitGroup // see keep

	// events is closed and replaced when a notice arrives (a rank failed or
	// returned), waking every waiter to look again.
	events  atomic.Pointer[chan struct{}]
	dead    atomic.Bool  // some rank has failed
	nexited atomic.Int64 // ranks known to have returned from Run

	mu      sync.Mutex
	ran     bool
	closed  bool
	reached bool            // the last Run reached every rank at its end
	first   *comm.PeerError // the first failure known here (FailedRank, Cause)
	firstAt int64           // when it happened, Unix nanoseconds at its origin
	causes  map[int]error   // failures by world rank
	exited  map[int]bool    // ranks whose Run function has returned
	cancel  context.CancelCauseFunc
	groups  map[string]*group
	comms   []mpiComm
	blocked map[uint64]blocker // what this process is blocked in, by id
	nextID  uint64

	queryMu sync.Mutex // one status query round at a time
	queryN  uint64

	workMu    sync.Mutex
	unclaimed []*work // Works nobody runs yet, for the controller to adopt (work.go)
	adopting  bool    // the controller runs and adopts them; else startWork starts their goroutine
}

// NewWorld initialises MPI if needed (Init) and returns this process's
// member of a new World over every process of MPI_COMM_WORLD. Every process
// must call it, in the same order relative to other Worlds (it duplicates
// MPI_COMM_WORLD, a collective). opts.Timeout bounds every blocking call
// (comm.Options).
func NewWorld(opts comm.Options) (*World, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	ctl, err := dupWorld()
	if err != nil {
		return nil, err
	}
	rank, size, err := rankSize(ctl)
	if err != nil {
		return nil, err
	}
	local, err := localSize(ctl)
	if err != nil {
		return nil, err
	}
	w := &World{
		timeout: opts.EffectiveTimeout(),
		rank:    rank,
		size:    size,
		tagUB:   tagUB(),
		busy:    busyPolling(local),
		ctl:     ctl,
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		causes:  map[int]error{},
		exited:  map[int]bool{},
		groups:  map[string]*group{},
		comms:   []mpiComm{ctl},
		blocked: map[uint64]blocker{},
	}
	ch := make(chan struct{})
	w.events.Store(&ch)
	hdr, err := dupWorld()
	if err != nil {
		return nil, err
	}
	global := make([]int, size)
	for i := range global {
		global[i] = i
	}
	if w.world, err = newGroup(w, "world", "world", hdr, global); err != nil {
		return nil, err
	}
	w.adopting = true
	go w.control()
	return w, nil
}

// Rank returns this process's rank in MPI_COMM_WORLD.
func (w *World) Rank() int { return w.rank }

// Size returns the number of processes.
func (w *World) Size() int { return w.size }

// Run runs fn on this process's rank with the world group (named "world",
// group rank = world rank), as local.World.Run runs it on every rank, and
// returns when every rank's fn has returned. A World runs once; a second
// Run returns an error.
//
// When this rank's fn returns an error or panics (the panic is recovered
// into a *comm.PanicError), or one of its calls gives up waiting, the rank tells
// every other process at once, on a communicator of its own that each
// process watches: their pending and later calls return a *comm.PeerError
// naming the rank and its error, and the context given to fn is cancelled
// with that error as cause. A rank whose fn returns while others wait on
// an operation it never issued fails the same way, named by the first rank
// to notice. When fn returns, the ranks agree on the outcome (one small
// MPI_Iallgather, bounded by Options.Timeout): Run returns nil when every
// rank's fn returned nil, else a *RunError whose root cause is the earliest
// failure of the world, the same on every rank. When some rank does not
// come back in time, the *RunError says so (Unreached); see Abort.
func (w *World) Run(ctx context.Context, fn func(ctx context.Context, g comm.Group) error) error {
	w.mu.Lock()
	if w.ran || w.closed {
		w.mu.Unlock()
		return errors.New("mpi: World.Run called twice or after Close; a World runs once, build another with NewWorld")
	}
	w.ran = true
	rctx, cancel := context.WithCancelCause(ctx)
	w.cancel = cancel
	if w.first != nil {
		cancel(w.first.Cause)
	}
	w.mu.Unlock()
	defer cancel(nil)

	err := runRank(rctx, w.rank, w.world, fn)
	if err != nil {
		w.failLocal(err)
	}
	w.markExited(w.rank)
	w.broadcast(notice{Kind: noticeExit})
	return w.agree(err)
}

func runRank(ctx context.Context, r int, g comm.Group, fn func(context.Context, comm.Group) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &comm.PanicError{Rank: r, Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx, g)
}

// Close stops the World's background work and frees its communicators.
// Call it on every process after Run, before Finalize. After a Run that
// could not reach every rank (RunError.Unreached) the communicators are
// left alone, since freeing them could wait on the missing rank.
func (w *World) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	free := w.reached || !w.ran
	comms := w.comms
	w.mu.Unlock()
	close(w.stop)
	<-w.stopped
	w.reapers.Wait()
	if !free {
		return nil
	}
	var errs []error
	for _, c := range comms {
		errs = append(errs, freeComm(c))
	}
	return errors.Join(errs...)
}

// signal wakes every waiter to re-examine the world.
func (w *World) signal() {
	ch := make(chan struct{})
	close(*w.events.Swap(&ch))
}

// failure returns the first failure known here, or nil.
func (w *World) failure() *comm.PeerError {
	if !w.dead.Load() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// fail records that world rank r failed with err at the Unix nanosecond
// at, and reports whether it was the first failure known here.
func (w *World) fail(r int, err error, at int64) bool {
	w.mu.Lock()
	if _, ok := w.causes[r]; !ok {
		w.causes[r] = err
	}
	first := w.first == nil
	if first {
		w.first = &comm.PeerError{FailedRank: r, Cause: err}
		w.firstAt = at
		w.dead.Store(true)
	}
	cancel := w.cancel
	w.mu.Unlock()
	if first && cancel != nil {
		cancel(err)
	}
	w.signal()
	return first
}

// failLocal records this rank's own failure and tells every other rank,
// unless the world had already failed (err is then a consequence).
func (w *World) failLocal(err error) {
	at := time.Now().UnixNano()
	if w.fail(w.rank, err, at) {
		w.broadcast(notice{Kind: noticeFail, Err: encodeError(err), Time: at})
	}
}

// failFor records, and tells every other rank, that world rank r failed
// with err as seen from here: r returned from its Run function without
// issuing an operation this rank waits on. The failure is r's, so that
// every rank names r, whichever noticed first.
func (w *World) failFor(r int, err error) {
	at := time.Now().UnixNano()
	if w.fail(r, err, at) {
		w.broadcast(notice{Kind: noticeRelay, FirstRank: r, First: encodeError(err), FirstTime: at})
	}
}

func (w *World) markExited(r int) {
	w.mu.Lock()
	if !w.exited[r] {
		w.exited[r] = true
		w.nexited.Add(1)
	}
	w.mu.Unlock()
	w.signal()
}

// rankState returns world rank r's failure and whether its Run function has
// returned, as known here.
func (w *World) rankState(r int) (failed error, exited bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.causes[r], w.exited[r]
}

// blocker is something a process can be blocked in: a call, or a Work
// being waited for. It is described only when a status query asks, not on
// every blocking call.
type blocker interface {
	doing() string // as a hang report's "blocked in" says it
}

// block records that this process is blocked in what; the id undoes it.
func (w *World) block(what blocker) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nextID++
	w.blocked[w.nextID] = what
	return w.nextID
}

func (w *World) unblock(id uint64) {
	w.mu.Lock()
	delete(w.blocked, id)
	w.mu.Unlock()
}

// keep takes over a call given up with MPI requests that may still be
// pending: its pinned and C memory must outlive them. A goroutine tests the
// requests every reapPoll and releases the memory once they complete; when
// the World closes first, it stops calling MPI and holds the memory for
// the life of the process, since MPI may still write into it.
func (w *World) keep(c *call) {
	w.reapers.Add(1)
	go w.reap(c)
}

const reapPoll = 10 * time.Millisecond

func (w *World) reap(c *call) {
	var s sleeper
	for !c.settled() {
		if s.sleep(reapPoll, w.stop, nil, nil, nil) {
			w.reapers.Done()
			hold := make(chan struct{})
			<-hold // never closed
			runtime.KeepAlive(c)
		}
	}
	w.reapers.Done()
	c.pin.Unpin()
	c.mem.free()
}

// register adds a group and its communicators to the world.
func (w *World) register(g *group, comms ...mpiComm) {
	w.mu.Lock()
	w.groups[g.key] = g
	w.comms = append(w.comms, comms...)
	w.mu.Unlock()
}

func (w *World) lookup(key string) *group {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.groups[key]
}
