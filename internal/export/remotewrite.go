package export

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// A remote-write 1.0 WriteRequest (prometheus/prompb types.proto,
// remote.proto), read with protowire so that the sink needs no generated
// Prometheus code: WriteRequest{timeseries=1, metadata=3},
// TimeSeries{labels=1, samples=2, exemplars=3, histograms=4},
// Label{name=1, value=2}, Sample{value=1 double, timestamp=2 int64}.

// label is one label of a series.
type label struct{ name, value string }

// sample is one float sample: a value at a time in milliseconds.
type sample struct {
	value     float64
	timestamp int64
}

// series is one TimeSeries of a WriteRequest; what this build does not
// show (exemplars, native histograms) is only counted.
type series struct {
	labels     []label
	samples    []sample
	histograms int
}

// errMalformed wraps every decoding error of a WriteRequest.
var errMalformed = errors.New("malformed remote-write request")

// decodeWriteRequest calls fn with each TimeSeries of b, in order. The
// series it passes is reused: fn must not keep it.
func decodeWriteRequest(b []byte, fn func(*series) error) error {
	var s series
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 {
			return nil // metadata and fields of later versions
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: timeseries of wire type %d", errMalformed, typ)
		}
		s.labels, s.samples, s.histograms = s.labels[:0], s.samples[:0], 0
		if err := decodeSeries(v, &s); err != nil {
			return err
		}
		return fn(&s)
	})
}

func decodeSeries(b []byte, s *series) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num >= 1 && num <= 4 && typ != protowire.BytesType {
			return fmt.Errorf("%w: field %d of a series of wire type %d", errMalformed, num, typ)
		}
		switch num {
		case 1:
			var l label
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if (num == 1 || num == 2) && typ != protowire.BytesType {
					return fmt.Errorf("%w: label field %d of wire type %d", errMalformed, num, typ)
				}
				switch num {
				case 1:
					l.name = string(v)
				case 2:
					l.value = string(v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			s.labels = append(s.labels, l)
		case 2:
			smp, err := decodeSample(v)
			if err != nil {
				return err
			}
			s.samples = append(s.samples, smp)
		case 4:
			s.histograms++
		}
		return nil
	})
}

func decodeSample(b []byte) (sample, error) {
	var smp sample
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			bits, _ := protowire.ConsumeFixed64(v)
			smp.value = math.Float64frombits(bits)
		case num == 2 && typ == protowire.VarintType:
			n, _ := protowire.ConsumeVarint(v)
			smp.timestamp = int64(n)
		case num == 1 || num == 2:
			return fmt.Errorf("%w: sample field %d of wire type %d", errMalformed, num, typ)
		}
		return nil
	})
	return smp, err
}

// eachField calls fn with each field of the message b: its number, wire
// type and raw value (a varint's or fixed value's bytes, or a length-
// delimited field's contents). Groups are refused: no field of these
// messages is one.
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			val, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(m))
			}
			v, n = val, m
		case protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			v = b[:n]
		default:
			return fmt.Errorf("%w: field %d of wire type %d", errMalformed, num, typ)
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
