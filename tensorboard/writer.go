// Package tensorboard writes TensorBoard event files: the scalars of a
// training run (Megatron's --tensorboard-dir), read by TensorBoard and by
// the tools that read its files.
//
// A file is a sequence of TFRecord records, each
//
//	uint64 length, little-endian
//	uint32 masked CRC-32C of the length's 8 bytes
//	length bytes of data
//	uint32 masked CRC-32C of the data
//
// where the mask of a CRC c is ((c >> 15) | (c << 17)) + 0xa282ead8 (the
// TFRecord format of TensorFlow's record_writer). Each record's data is a
// tensorflow.Event protocol buffer: the first holds only file_version
// "brain.Event:2", every later one a wall time, a step and a Summary of one
// scalar value (Summary.Value's tag and simple_value), as PyTorch's
// SummaryWriter.add_scalar writes it. The protocol buffers are encoded
// with google.golang.org/protobuf's protowire; the field numbers are
// tensorflow/core/util/event.proto's and summary.proto's.
package tensorboard

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers of tensorflow.Event, tensorflow.Summary and
// tensorflow.Summary.Value.
const (
	eventWallTime    protowire.Number = 1 // double
	eventStep        protowire.Number = 2 // int64
	eventFileVersion protowire.Number = 3 // string
	eventSummary     protowire.Number = 5 // Summary
	summaryValue     protowire.Number = 1 // repeated Summary.Value
	valueTag         protowire.Number = 1 // string
	valueSimpleValue protowire.Number = 2 // float
)

// FileVersion is the first event's file_version.
const FileVersion = "brain.Event:2"

// Writer appends scalars to one event file. It is not safe for
// concurrent use.
type Writer struct {
	f       *os.File
	w       *bufio.Writer
	queue   int // events kept in memory before they are written out
	pending int
	now     func() time.Time
}

// Options are a Writer's settings.
type Options struct {
	// QueueSize is how many events are kept before the file is flushed
	// (Megatron's --tensorboard-queue-size; at least 1).
	QueueSize int
	// Now gives each event's wall time (time.Now when nil).
	Now func() time.Time
}

// Create makes dir if needed and opens a new event file in it, named as
// TensorBoard finds it: events.out.tfevents.<seconds>.<host>.<pid>.
func Create(dir string, o Options) (*Writer, error) {
	if o.QueueSize < 1 {
		return nil, fmt.Errorf("tensorboard: queue size %d: it must be at least 1", o.QueueSize)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	name := fmt.Sprintf("events.out.tfevents.%d.%s.%d", o.Now().Unix(), host, os.Getpid())
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{f: f, w: bufio.NewWriter(f), queue: o.QueueSize, now: o.Now}
	var ev []byte
	ev = protowire.AppendTag(ev, eventWallTime, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(wallTime(o.Now())))
	ev = protowire.AppendTag(ev, eventFileVersion, protowire.BytesType)
	ev = protowire.AppendString(ev, FileVersion)
	if err := w.record(ev); err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Path returns the event file's path.
func (w *Writer) Path() string { return w.f.Name() }

// Scalar appends the scalar value of tag at step (TensorBoard's x axis).
// The value is stored as a float32, as every scalar summary is.
func (w *Writer) Scalar(tag string, value float64, step int64) error {
	var v []byte
	v = protowire.AppendTag(v, valueTag, protowire.BytesType)
	v = protowire.AppendString(v, tag)
	v = protowire.AppendTag(v, valueSimpleValue, protowire.Fixed32Type)
	v = protowire.AppendFixed32(v, math.Float32bits(float32(value)))
	var s []byte
	s = protowire.AppendTag(s, summaryValue, protowire.BytesType)
	s = protowire.AppendBytes(s, v)
	var ev []byte
	ev = protowire.AppendTag(ev, eventWallTime, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(wallTime(w.now())))
	ev = protowire.AppendTag(ev, eventStep, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	ev = protowire.AppendTag(ev, eventSummary, protowire.BytesType)
	ev = protowire.AppendBytes(ev, s)
	if err := w.record(ev); err != nil {
		return err
	}
	if w.pending++; w.pending >= w.queue {
		return w.Flush()
	}
	return nil
}

// Flush writes the events kept so far to the file.
func (w *Writer) Flush() error {
	w.pending = 0
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	return nil
}

// Close flushes the events and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tensorboard: %w", cerr)
	}
	return err
}

// record appends one TFRecord holding data.
func (w *Writer) record(data []byte) error {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], MaskedCRC(head[:8]))
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], MaskedCRC(data))
	for _, b := range [][]byte{head[:], data, tail[:]} {
		if _, err := w.w.Write(b); err != nil {
			return fmt.Errorf("tensorboard: %w", err)
		}
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC is TFRecord's masked CRC-32C (Castagnoli) of b.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// wallTime is t in seconds since the Unix epoch.
func wallTime(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }
