package tensorboard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scalar is one decoded event: a scalar, or the file_version event.
type scalar struct {
	wall    float64
	step    int64
	tag     string
	value   float32
	version string
}

// readEvents decodes an event file from the format's specification,
// independently of the writer: TFRecord framing with both masked CRCs
// checked (the mask computed here, not by MaskedCRC), then Event's and
// Summary's fields by hand, without a protocol-buffer library.
func readEvents(b []byte) ([]scalar, error) {
	table := crc32.MakeTable(crc32.Castagnoli)
	mask := func(p []byte) uint32 {
		c := crc32.Checksum(p, table)
		return ((c >> 15) | (c << 17)) + 0xa282ead8
	}
	var out []scalar
	for len(b) > 0 {
		if len(b) < 12 {
			return nil, errors.New("truncated record header")
		}
		n := binary.LittleEndian.Uint64(b[:8])
		if binary.LittleEndian.Uint32(b[8:12]) != mask(b[:8]) {
			return nil, errors.New("bad length CRC")
		}
		if uint64(len(b)-12) < n+4 {
			return nil, errors.New("truncated record")
		}
		data := b[12 : 12+n]
		if binary.LittleEndian.Uint32(b[12+n:16+n]) != mask(data) {
			return nil, errors.New("bad data CRC")
		}
		ev, err := decodeEvent(data)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
		b = b[16+n:]
	}
	return out, nil
}

// readFile decodes the event file path with readEvents.
func readFile(t *testing.T, path string) []scalar {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := readEvents(b)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// field is one protocol-buffer field: its number and wire type, and its
// varint or fixed value or its bytes.
type field struct {
	num, typ int
	u        uint64
	bytes    []byte
}

func fields(b []byte) ([]field, error) {
	var out []field
	varint := func() (uint64, error) {
		var v uint64
		for i := 0; i < 10; i++ {
			if len(b) == 0 {
				return 0, errors.New("truncated varint")
			}
			c := b[0]
			b = b[1:]
			v |= uint64(c&0x7f) << (7 * i)
			if c < 0x80 {
				return v, nil
			}
		}
		return 0, errors.New("varint too long")
	}
	for len(b) > 0 {
		key, err := varint()
		if err != nil {
			return nil, err
		}
		f := field{num: int(key >> 3), typ: int(key & 7)}
		switch f.typ {
		case 0:
			f.u, err = varint()
		case 1:
			if len(b) < 8 {
				return nil, errors.New("truncated fixed64")
			}
			f.u, b = binary.LittleEndian.Uint64(b), b[8:]
		case 5:
			if len(b) < 4 {
				return nil, errors.New("truncated fixed32")
			}
			f.u, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case 2:
			var n uint64
			if n, err = varint(); err == nil && n > uint64(len(b)) {
				err = errors.New("truncated bytes")
			}
			if err == nil {
				f.bytes, b = b[:n], b[n:]
			}
		default:
			err = fmt.Errorf("wire type %d", f.typ)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// decodeEvent reads Event: 1 wall_time (double), 2 step (int64), 3
// file_version (string), 5 summary: Summary 1 value: Value 1 tag, 2
// simple_value (float).
func decodeEvent(b []byte) (scalar, error) {
	var ev scalar
	fs, err := fields(b)
	if err != nil {
		return ev, err
	}
	for _, f := range fs {
		switch f.num {
		case 1:
			ev.wall = math.Float64frombits(f.u)
		case 2:
			ev.step = int64(f.u)
		case 3:
			ev.version = string(f.bytes)
		case 5:
			sf, err := fields(f.bytes)
			if err != nil || len(sf) != 1 || sf[0].num != 1 {
				return ev, fmt.Errorf("summary: %v (%d fields)", err, len(sf))
			}
			vf, err := fields(sf[0].bytes)
			if err != nil {
				return ev, err
			}
			for _, v := range vf {
				switch v.num {
				case 1:
					ev.tag = string(v.bytes)
				case 2:
					ev.value = math.Float32frombits(uint32(v.u))
				}
			}
		}
	}
	return ev, nil
}

// TestWriterRoundTrip: the file starts with the file_version event and
// holds every scalar with its tag, step, value (as a float32) and wall
// time, each record framed with valid masked CRCs.
func TestWriterRoundTrip(t *testing.T) {
	at := time.Unix(1700000000, 250_000_000)
	w, err := Create(filepath.Join(t.TempDir(), "tb"), Options{QueueSize: 100, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(w.Path()), "events.out.tfevents.1700000000.") {
		t.Errorf("file name %s: TensorBoard looks for events.out.tfevents.*", w.Path())
	}
	want := []scalar{{tag: "lm loss", value: 10.25, step: 1}, {tag: "learning-rate", value: 3e-4, step: 1}, {tag: "grad-norm", value: float32(math.Pi), step: 2}, {tag: "lm loss vs samples", value: 9, step: 1 << 40}}
	for _, s := range want {
		if err := w.Scalar(s.tag, float64(s.value), s.step); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, w.Path())
	if len(got) != len(want)+1 || got[0].version != "brain.Event:2" {
		t.Fatalf("%d events, the first %+v: want %d and file_version brain.Event:2", len(got), got[0], len(want)+1)
	}
	for i, s := range want {
		g := got[i+1]
		if g.tag != s.tag || g.value != s.value || g.step != s.step || g.wall != 1700000000.25 {
			t.Errorf("event %d: %+v, want %+v at wall time 1700000000.25", i+1, g, s)
		}
	}
}

// TestScalarBytes: one scalar event is, byte for byte, the encoding the
// specification gives: Event{wall_time 2.0, step 3, summary{value{tag
// "x", simple_value 1.0}}}, framed as one TFRecord.
func TestScalarBytes(t *testing.T) {
	w, err := Create(t.TempDir(), Options{QueueSize: 1, Now: func() time.Time { return time.Unix(2, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(w.Path())
	if err := w.Scalar("x", 1, 3); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(w.Path()) // QueueSize 1: already written
	w.Close()
	data := []byte{
		0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, // 1: wall_time, fixed64 2.0
		0x10, 0x03, // 2: step, varint 3
		0x2a, 0x0a, // 5: summary, 10 bytes
		0x0a, 0x08, // Summary 1: value, 8 bytes
		0x0a, 0x01, 'x', // Value 1: tag "x"
		0x15, 0, 0, 0x80, 0x3f, // Value 2: simple_value, fixed32 1.0
	}
	rec := binary.LittleEndian.AppendUint64(nil, uint64(len(data)))
	rec = binary.LittleEndian.AppendUint32(rec, MaskedCRC(rec))
	rec = append(rec, data...)
	rec = binary.LittleEndian.AppendUint32(rec, MaskedCRC(data))
	if got := after[len(before):]; !bytes.Equal(got, rec) {
		t.Errorf("record\n% x\nwant\n% x", got, rec)
	}
}

// TestMaskedCRC: CRC-32C's check value (of "123456789", 0xe3069283)
// masked as TFRecord masks it.
func TestMaskedCRC(t *testing.T) {
	var c uint32 = 0xe3069283
	if got, want := MaskedCRC([]byte("123456789")), (c>>15|c<<17)+0xa282ead8; got != want {
		t.Errorf("%#x, want %#x", got, want)
	}
}

// TestQueue: events wait in memory until QueueSize of them have come,
// then reach the file together; Close writes the rest.
func TestQueue(t *testing.T) {
	w, err := Create(t.TempDir(), Options{QueueSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int { return len(readFile(t, w.Path())) - 1 }
	for i, want := range []int{0, 0, 3, 3} {
		if err := w.Scalar("a", float64(i), int64(i)); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != want {
			t.Errorf("after %d scalars, %d in the file, want %d", i+1, got, want)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 4 {
		t.Errorf("after Close, %d scalars in the file, want 4", got)
	}
	if _, err := Create(t.TempDir(), Options{}); err == nil {
		t.Error("a queue size of 0 was accepted")
	}
}
