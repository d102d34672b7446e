package ckpt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/gotron/gotron/comm"
)

// Saver writes a run's checkpoints into Dir from every rank of World at
// once: each rank writes its own shard, rank 0 the manifest, and the
// iteration is installed only once every shard is on disk (Commit), so a
// save that fails anywhere leaves the previous checkpoint as it was.
//
// A save has three steps, each called by every rank at the same point:
// Begin (rank 0 prepares a temporary directory, every rank learns its
// name), Write (each rank writes its pieces into its shard, in the
// background when asked), Finish (the shards' indexes are gathered, rank 0
// commits, every rank learns the outcome). A run that fails calls Abandon
// so that no background write outlives it; the temporary directory is
// removed by the next save (RemoveStale).
type Saver struct {
	World comm.Group
	Dir   string
	// WriteShard and Commit write a shard and install an iteration;
	// nil means the package's WriteShard and Commit (tests replace them to
	// make a save fail).
	WriteShard func(dir string, rank int, pieces []PieceData) (Shard, error)
	Commit     func(dir, tmp string, m *Manifest) error

	pending *pending
}

// pending is a checkpoint whose shards are being written.
type pending struct {
	iteration int
	tmp       string    // the temporary directory the shards go to
	manifest  *Manifest // everything but the shards (rank 0's; nil elsewhere)
	done      chan shardResult
	written   bool // Write was called: done will receive this rank's result
}

// shardResult is what a rank reports after writing its shard.
type shardResult struct {
	Shard *Shard `json:"shard,omitempty"`
	Error string `json:"error,omitempty"`
}

// Begin starts the save of iteration it: rank 0 creates the temporary
// directory (BeginSave, with a fresh nonce) and every rank learns its
// name. manifest is rank 0's record of everything but the shards (nil on
// the other ranks). A save still in flight must be finished first.
func (s *Saver) Begin(ctx context.Context, it int, manifest *Manifest) error {
	if s.pending != nil {
		return fmt.Errorf("ckpt: Begin of iteration %d while iteration %d is being saved: Finish it first", it, s.pending.iteration)
	}
	w := s.World
	head := []int64{0, 0}
	var beginErr error
	if w.Rank() == 0 {
		nonce := rand.Uint64()
		if _, beginErr = BeginSave(s.Dir, it, nonce); beginErr != nil {
			head[0] = 1
		}
		head[1] = int64(nonce)
	}
	if err := w.Broadcast(ctx, comm.I64(head), 0); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if head[0] != 0 {
		if beginErr != nil {
			return fmt.Errorf("%w (%s)", beginErr, s.previous())
		}
		return fmt.Errorf("save checkpoint: rank 0 could not prepare %s (see its error; %s)", s.Dir, s.previous())
	}
	s.pending = &pending{iteration: it, tmp: TempDir(s.Dir, it, uint64(head[1])), manifest: manifest, done: make(chan shardResult, 1)}
	return nil
}

// Write writes this rank's pieces of the begun save into its shard: in
// the background with async (a later Finish installs the iteration),
// else before it returns, followed by Finish. It returns the iteration
// installed (0: none yet).
func (s *Saver) Write(ctx context.Context, pieces []PieceData, async bool) (installed int, err error) {
	p := s.pending
	if p == nil || p.written {
		return 0, errors.New("ckpt: Write without Begin")
	}
	p.written = true
	write := s.WriteShard
	if write == nil {
		write = WriteShard
	}
	rank := s.World.Rank()
	run := func() {
		result := shardResult{}
		if len(pieces) > 0 {
			sh, err := write(p.tmp, rank, pieces)
			if err != nil {
				result.Error = fmt.Sprintf("rank %d: %v", rank, err)
			} else {
				result.Shard = &sh
			}
		}
		p.done <- result
	}
	if async {
		go run()
		return 0, nil
	}
	run()
	return s.Finish(ctx, true)
}

// Finish installs the checkpoint being written, if any, and returns its
// iteration (0: none installed). Blocking, it waits for this rank's
// shard; otherwise it installs the checkpoint only when every rank's
// shard is written (agreed by an 8-byte all-reduce) and returns 0 at once
// when one is not.
func (s *Saver) Finish(ctx context.Context, blocking bool) (installed int, err error) {
	p := s.pending
	if p == nil {
		return 0, nil
	}
	if !p.written {
		return 0, fmt.Errorf("ckpt: Finish of iteration %d before its Write", p.iteration)
	}
	if !blocking {
		if ready, err := s.allWritten(ctx); err != nil || !ready {
			return 0, err
		}
	}
	result := <-p.done
	s.pending = nil
	results, err := gatherJSON(ctx, s.World, result)
	if err != nil {
		return 0, fmt.Errorf("save checkpoint: gathering the shards' indexes: %w", err)
	}
	if err := s.install(ctx, p, results); err != nil {
		return 0, err
	}
	return p.iteration, nil
}

// allWritten reports, the same on every rank, whether every rank's shard
// of the pending save is written.
func (s *Saver) allWritten(ctx context.Context) (bool, error) {
	p := s.pending
	waiting := []int64{1}
	select {
	case result := <-p.done:
		p.done <- result // keep it for the call that installs
		waiting[0] = 0
	default:
	}
	if err := s.World.AllReduce(ctx, comm.I64(waiting), comm.Max); err != nil {
		return false, fmt.Errorf("save checkpoint: agreeing whether the shards are written: %w", err)
	}
	return waiting[0] == 0, nil
}

// install has rank 0 record the shards in the manifest and commit the
// iteration (or remove the temporary directory when a rank failed), and
// tells every rank the outcome.
func (s *Saver) install(ctx context.Context, p *pending, results [][]byte) error {
	status := []int64{0}
	var saveErr error
	if s.World.Rank() == 0 {
		if saveErr = collectShards(p.manifest, results); saveErr != nil {
			RemoveTemp(p.tmp)
			saveErr = fmt.Errorf("save checkpoint: %w", saveErr)
		} else {
			commit := s.Commit
			if commit == nil {
				commit = Commit
			}
			saveErr = commit(s.Dir, p.tmp, p.manifest)
		}
		if saveErr != nil {
			status[0] = 1
		}
	}
	if err := s.World.Broadcast(ctx, comm.I64(status), 0); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if saveErr != nil {
		return fmt.Errorf("%w (%s)", saveErr, s.previous())
	}
	if status[0] != 0 {
		return fmt.Errorf("save checkpoint: the save into %s failed (see rank 0's error; %s)", s.Dir, s.previous())
	}
	return nil
}

// collectShards adds every rank's shard index to m and joins the ranks'
// errors.
func collectShards(m *Manifest, results [][]byte) error {
	var errs []error
	for _, raw := range results {
		var r shardResult
		if err := json.Unmarshal(raw, &r); err != nil {
			errs = append(errs, err)
			continue
		}
		if r.Error != "" {
			errs = append(errs, errors.New(r.Error))
		}
		if r.Shard != nil {
			m.Shards = append(m.Shards, *r.Shard)
		}
	}
	return errors.Join(errs...)
}

// Pending returns the iteration being saved and not yet installed (0:
// none).
func (s *Saver) Pending() int {
	if s.pending == nil {
		return 0
	}
	return s.pending.iteration
}

// Abandon waits for this rank's background shard writer, if one is
// running, so that no write outlives a run that failed, and forgets the
// save.
func (s *Saver) Abandon() {
	if s.pending != nil && s.pending.written {
		<-s.pending.done
	}
	s.pending = nil
}

// previous says what a failed save leaves in the directory.
func (s *Saver) previous() string {
	if it, err := Latest(s.Dir); err == nil {
		return fmt.Sprintf("the checkpoint of iteration %d in %s is intact", it, s.Dir)
	}
	return fmt.Sprintf("no earlier checkpoint was saved in %s", s.Dir)
}

// gatherJSON gathers every rank's v, JSON-encoded, to every rank of w, in
// rank order (the bytes travel packed eight to an int64).
func gatherJSON(ctx context.Context, w comm.Group, v any) ([][]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	words := make([]int64, (len(b)+7)/8)
	padded := make([]byte, 8*len(words))
	copy(padded, b)
	for i := range words {
		words[i] = int64(binary.LittleEndian.Uint64(padded[8*i:]))
	}
	lens := make([]int64, w.Size())
	if err := w.AllGather(ctx, comm.I64(lens), comm.I64([]int64{int64(len(b))})); err != nil {
		return nil, err
	}
	counts := make([]int, w.Size())
	total := 0
	for r, n := range lens {
		counts[r] = int((n + 7) / 8)
		total += counts[r]
	}
	out := make([]int64, total)
	if err := w.AllGatherV(ctx, comm.I64(out), comm.I64(words), counts); err != nil {
		return nil, err
	}
	res := make([][]byte, w.Size())
	off := 0
	for r := range res {
		buf := make([]byte, 8*counts[r])
		for i := 0; i < counts[r]; i++ {
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(out[off+i]))
		}
		res[r] = buf[:lens[r]]
		off += counts[r]
	}
	return res, nil
}
