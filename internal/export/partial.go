package export

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// partialSuccess reads an OTLP Export…ServiceResponse (protobuf): its
// partial_success (field 1) holds the items the receiver rejected
// (field 1, int64: data points, log records or spans by signal) and why
// (field 2). OTLP/HTTP says a client must not retry such a request: the
// rejected items are counted and logged, not sent again. An empty body
// is a full success.
func partialSuccess(b []byte) (rejected int64, msg string, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: partial_success of wire type %d", errMalformed, typ)
		}
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				n, _ := protowire.ConsumeVarint(v)
				rejected = int64(n)
			case num == 2 && typ == protowire.BytesType:
				msg = string(v)
			case num == 1 || num == 2:
				return fmt.Errorf("%w: partial_success field %d of wire type %d", errMalformed, num, typ)
			}
			return nil
		})
	})
	return rejected, msg, err
}
