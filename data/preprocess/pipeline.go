package preprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/gotron/gotron/data"
	"github.com/gotron/gotron/data/indexed"
)

// chunkSize is the size of the pieces of JSON-lines input handed to a worker.
const chunkSize = 1 << 20

// chunk is a piece of input: whole JSON lines of one file, or one plain-text file.
type chunk struct {
	seq  int    // order in the input
	file string // the file it comes from
	line int    // the number of its first line (JSON lines)
	json bool
	data []byte
}

// encoded is a tokenized chunk: per key, the tokens of its documents concatenated and
// the lengths of their sequences, with the number of sequences of each document.
type encoded struct {
	seq    int
	bytes  int64
	docs   int
	keys   []keyTokens
	counts counts
	err    error
}

// keyTokens are one key's tokens of a chunk.
type keyTokens struct {
	tokens  []int32
	seqLens []int // every sequence's length, document after document
	nSeqs   []int // each document's number of sequences
}

// counts are what a chunk skipped.
type counts struct{ bad, binary, blank int64 }

// pipeline reads the files, tokenizes them on the workers and writes the documents to
// the writers (one per key) in input order.
func (o *Options) pipeline(ctx context.Context, files []data.File, writers []*indexed.Writer) (Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, 4*o.Workers) // chunks in flight, bounding memory
	in := make(chan chunk, o.Workers)
	out := make(chan encoded, o.Workers)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(in)
		if err := read(ctx, files, slots, in); err != nil {
			cancel(err)
		}
	}()
	var workers sync.WaitGroup
	for range o.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for c := range in {
				e := o.encode(c)
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { workers.Wait(); close(out) }()
	var total int64
	for _, f := range files {
		total += f.Size
	}
	res, err := o.write(ctx, out, slots, writers, total)
	if err != nil {
		cancel(err)
	}
	for range out { // let the workers finish
	}
	wg.Wait()
	if err == nil {
		err = context.Cause(ctx) // the reader's error, or the caller's cancellation
	}
	return res, err
}

// read sends the input in chunks, taking a slot for each.
func read(ctx context.Context, files []data.File, slots chan struct{}, in chan<- chunk) error {
	seq := 0
	send := func(c chunk) error {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		c.seq = seq
		seq++
		select {
		case in <- c:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	for _, f := range files {
		if err := readFile(f.Path, send); err != nil {
			return err
		}
	}
	return nil
}

// readFile sends one file: a plain-text file whole, a JSON-lines file in chunks of whole
// lines.
func readFile(path string, send func(chunk) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--input %s: %w", path, err)
	}
	defer fh.Close()
	if !isJSON(path) {
		b, err := io.ReadAll(fh)
		if err != nil {
			return fmt.Errorf("--input %s: %w", path, err)
		}
		return send(chunk{file: path, data: b})
	}
	line := 1
	var carry []byte
	for {
		buf := make([]byte, len(carry), len(carry)+chunkSize)
		copy(buf, carry)
		n, err := io.ReadFull(fh, buf[len(carry):cap(buf)])
		buf = buf[:len(carry)+n]
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if len(buf) > 0 {
				return send(chunk{file: path, line: line, json: true, data: buf})
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("--input %s: %w", path, err)
		}
		i := bytes.LastIndexByte(buf, '\n')
		if i < 0 { // a line longer than the buffer: read on
			carry = buf
			continue
		}
		carry = append([]byte(nil), buf[i+1:]...)
		c := chunk{file: path, line: line, json: true, data: buf[:i+1]}
		line += bytes.Count(c.data, []byte{'\n'})
		if err := send(c); err != nil {
			return err
		}
	}
}

// write adds the encoded chunks' documents to the writers in input order, drawing the
// progress line.
func (o *Options) write(ctx context.Context, out <-chan encoded, slots chan struct{}, writers []*indexed.Writer, total int64) (Result, error) {
	var res Result
	pending := map[int]encoded{}
	next := 0
	start, drawn := time.Now(), time.Time{}
	for {
		var e encoded
		var ok bool
		select {
		case e, ok = <-out:
		case <-ctx.Done():
			return res, context.Cause(ctx)
		}
		if !ok {
			break
		}
		pending[e.seq] = e
		for {
			e, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-slots
			if e.err != nil {
				return res, e.err
			}
			if err := add(writers, e); err != nil {
				return res, err
			}
			res.Bytes += e.bytes
			before := res.Documents
			res.Documents += int64(e.docs)
			if n := int64(o.LogInterval); o.Log != nil && n > 0 && res.Documents/n > before/n {
				el := time.Since(start).Seconds()
				fmt.Fprintf(o.Log, "preprocess: %d documents (%.0f docs/s, %.2f MB/s)\n", res.Documents, float64(res.Documents)/el, float64(res.Bytes)/1e6/el)
			}
			res.BadLines += e.counts.bad
			res.Binary += e.counts.binary
			res.BlankLines += e.counts.blank
			for _, k := range e.keys {
				res.Tokens += int64(len(k.tokens))
			}
		}
		if o.Progress != nil && time.Since(drawn) > 200*time.Millisecond {
			drawn = time.Now()
			drawProgress(o.Progress, res, total, time.Since(start))
		}
	}
	if o.Progress != nil {
		drawProgress(o.Progress, res, total, time.Since(start))
		fmt.Fprintln(o.Progress)
	}
	return res, nil
}

// add writes the documents of a chunk.
func add(writers []*indexed.Writer, e encoded) error {
	for i, k := range e.keys {
		tok, lens := k.tokens, k.seqLens
		for _, n := range k.nSeqs {
			sum := 0
			for _, l := range lens[:n] {
				sum += l
			}
			if err := writers[i].AddDocument(tok[:sum], lens[:n:n]); err != nil {
				return err
			}
			tok, lens = tok[sum:], lens[n:]
		}
	}
	return nil
}

// drawProgress redraws the progress line: bytes read of the total, the rate and the
// documents.
func drawProgress(w io.Writer, r Result, total int64, elapsed time.Duration) {
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(r.Bytes) / float64(total)
	}
	rate := float64(r.Bytes) / 1e6 / max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "\r\x1b[Kpreprocess: %5.1f%% %.1f / %.1f MB, %.1f MB/s, %d documents, %d tokens",
		pct, float64(r.Bytes)/1e6, float64(total)/1e6, rate, r.Documents, r.Tokens)
}
