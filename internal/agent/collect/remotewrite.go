package collect

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of Prometheus remote-write 1.0 (prometheus/prompb
// remote.proto and types.proto) that validation looks into.
const (
	rwTimeseries protowire.Number = 1 // WriteRequest.timeseries
	rwMetadata   protowire.Number = 3 // WriteRequest.metadata
	tsLabels     protowire.Number = 1 // TimeSeries.labels
	tsSamples    protowire.Number = 2 // TimeSeries.samples
	tsExemplars  protowire.Number = 3 // TimeSeries.exemplars
	tsHistograms protowire.Number = 4 // TimeSeries.histograms
	labelName    protowire.Number = 1 // Label.name
	labelValue   protowire.Number = 2 // Label.value
)

// checkWriteRequest returns the number of time series in a WriteRequest
// (uncompressed protobuf), or errMalformed. It checks what a receiver
// decoding it with the generated types would refuse where it matters to
// the exporter: the wire format throughout, that the known fields of
// WriteRequest and TimeSeries are messages, and that label names and
// values are UTF-8. Unknown fields pass (a newer sender's additions).
func checkWriteRequest(body []byte) (series int, err error) {
	err = walkFields(body, func(num protowire.Number, typ protowire.Type, val []byte) error {
		switch num {
		case rwTimeseries:
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: WriteRequest.timeseries of wire type %d", errMalformed, typ)
			}
			series++
			return checkTimeSeries(val)
		case rwMetadata:
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: WriteRequest.metadata of wire type %d", errMalformed, typ)
			}
			return walkFields(val, ignoreField)
		}
		return nil
	})
	return series, err
}

func checkTimeSeries(ts []byte) error {
	return walkFields(ts, func(num protowire.Number, typ protowire.Type, val []byte) error {
		switch num {
		case tsLabels, tsSamples, tsExemplars, tsHistograms:
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: TimeSeries field %d of wire type %d", errMalformed, num, typ)
			}
		default:
			return nil
		}
		if num == tsLabels {
			return walkFields(val, checkLabelField)
		}
		return walkFields(val, ignoreField)
	})
}

func checkLabelField(num protowire.Number, typ protowire.Type, val []byte) error {
	if num != labelName && num != labelValue {
		return nil
	}
	if typ != protowire.BytesType || !utf8.Valid(val) {
		return fmt.Errorf("%w: a label's name or value is not a UTF-8 string", errMalformed)
	}
	return nil
}

// ignoreField accepts any well-formed field: walkFields has checked its
// wire format.
func ignoreField(protowire.Number, protowire.Type, []byte) error { return nil }
