package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// Scalar is one scalar event of a file: its tag, step and value.
type Scalar struct {
	Tag   string
	Step  int64
	Value float32
	// WallTime is when it was written, in seconds since the Unix epoch.
	WallTime float64
}

// ReadFile returns the scalar events of the event file path, in order
// (events without a scalar, such as the file_version one, are skipped).
// A truncated or corrupt record is an error naming its offset.
func ReadFile(path string) ([]Scalar, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	return Read(b)
}

// Read returns the scalar events of an event file's bytes (ReadFile).
func Read(b []byte) ([]Scalar, error) {
	var out []Scalar
	for off := 0; off < len(b); {
		data, n, err := nextRecord(b[off:])
		if err != nil {
			return nil, fmt.Errorf("tensorboard: the record at byte %d: %w", off, err)
		}
		s, ok, err := decodeScalar(data)
		if err != nil {
			return nil, fmt.Errorf("tensorboard: the event at byte %d: %w", off, err)
		}
		if ok {
			out = append(out, s)
		}
		off += n
	}
	return out, nil
}

// ByTag returns the scalars' values by tag and step (a later event of
// the same tag and step replaces an earlier one).
func ByTag(scalars []Scalar) map[string]map[int64]float32 {
	out := map[string]map[int64]float32{}
	for _, e := range scalars {
		if out[e.Tag] == nil {
			out[e.Tag] = map[int64]float32{}
		}
		out[e.Tag][e.Step] = e.Value
	}
	return out
}

// nextRecord checks the TFRecord at the start of b and returns its data
// and its whole length.
func nextRecord(b []byte) ([]byte, int, error) {
	if len(b) < 12 {
		return nil, 0, errors.New("truncated header")
	}
	n := binary.LittleEndian.Uint64(b)
	if binary.LittleEndian.Uint32(b[8:]) != MaskedCRC(b[:8]) {
		return nil, 0, errors.New("the length's checksum does not match")
	}
	if len(b) < 16 || n > uint64(len(b)-16) {
		return nil, 0, fmt.Errorf("%d bytes of data, %d left in the file", n, max(len(b)-16, 0))
	}
	data := b[12 : 12+n]
	if binary.LittleEndian.Uint32(b[12+n:]) != MaskedCRC(data) {
		return nil, 0, errors.New("the data's checksum does not match")
	}
	return data, 16 + int(n), nil
}

// decodeScalar reads an Event; ok says it holds a scalar summary value.
func decodeScalar(b []byte) (s Scalar, ok bool, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			s.WallTime = math.Float64frombits(u)
		case num == eventStep && typ == protowire.VarintType:
			s.Step = int64(u)
		case num == eventSummary && typ == protowire.BytesType:
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != summaryValue || typ != protowire.BytesType {
					return nil
				}
				return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
					switch {
					case num == valueTag && typ == protowire.BytesType:
						s.Tag = string(v)
					case num == valueSimpleValue && typ == protowire.Fixed32Type:
						s.Value, ok = math.Float32frombits(uint32(u)), true
					}
					return nil
				})
			})
		}
		return nil
	})
	return s, ok, err
}

// eachField calls fn with every field of the message b: its number, wire
// type, and its bytes (length-delimited) or value (varint, fixed).
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var u uint64
		switch typ {
		case protowire.VarintType:
			u, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var u32 uint32
			u32, n = protowire.ConsumeFixed32(b)
			u = uint64(u32)
		case protowire.Fixed64Type:
			u, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, u); err != nil {
			return err
		}
	}
	return nil
}
