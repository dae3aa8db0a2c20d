package frame_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// A requester asks for a stream over TCP: frames are written with a 24-bit
// length prefix into one reused buffer, then read back and parsed into
// views that point into the read buffer.
func Example() {
	var wire bytes.Buffer
	out := make([]byte, 0, 512)

	setup := frame.Setup{
		MajorVersion: frame.ProtocolMajor, MinorVersion: frame.ProtocolMinor,
		KeepaliveInterval: 20_000, MaxLifetime: 90_000,
		MetadataMIME: []byte("message/x.rsocket.composite-metadata.v0"),
		DataMIME:     []byte("application/json"),
	}
	for _, add := range []func([]byte) ([]byte, error){
		func(b []byte) ([]byte, error) { return frame.AppendSetup(b, setup) },
		func(b []byte) ([]byte, error) {
			return frame.AppendRequestStream(b, 1, 0, 16, nil, []byte(`{"topic":"logs"}`))
		},
		func(b []byte) ([]byte, error) { return frame.AppendCancel(b, 1) },
	} {
		at := len(out)
		out = frame.ReserveLengthPrefix(out)
		var err error
		if out, err = add(out); err != nil {
			panic(err)
		}
		if err := frame.SetLengthPrefix(out, at); err != nil {
			panic(err)
		}
	}
	wire.Write(out)

	r := bufio.NewReader(&wire)
	buf := make([]byte, 0, 4096)
	for {
		b, err := frame.ReadLengthPrefixed(r, buf, 0)
		if err != nil {
			break // io.EOF
		}
		buf = b // reuse the memory for the next frame
		h, err := frame.ParseHeader(b)
		if err != nil {
			panic(err)
		}
		switch h.Type {
		case frame.TypeSetup:
			s, _ := frame.ParseSetup(b)
			fmt.Printf("SETUP v%d.%d keepalive=%dms data=%s\n", s.MajorVersion, s.MinorVersion, s.KeepaliveInterval, s.DataMIME)
		case frame.TypeRequestStream:
			rs, err := frame.ParseRequestStream(b)
			if frame.IsIgnorable(err) {
				continue
			}
			fmt.Printf("REQUEST_STREAM stream=%d n=%d data=%s resumable=%v\n", rs.StreamID, rs.InitialN, rs.Data, rs.Resumable())
		default:
			if _, err := frame.Validate(b); err == nil {
				fmt.Printf("%v stream=%d\n", h.Type, h.StreamID)
			}
		}
	}
	// Output:
	// SETUP v1.0 keepalive=20000ms data=application/json
	// REQUEST_STREAM stream=1 n=16 data={"topic":"logs"} resumable=true
	// CANCEL stream=1
}

// Malformed input is never a panic: the error says what to do with it.
func ExampleDecodeError() {
	bad := []byte{0, 0, 0, 1, 0x18, 0x00, 0, 0, 0, 0} // REQUEST_STREAM, stream 1, N = 0
	_, err := frame.ParseRequestStream(bad)
	var de *frame.DecodeError
	if errors.As(err, &de) {
		fmt.Println(de.Kind, de.Code, "on stream", de.StreamID)
	}
	// Output:
	// stream error INVALID on stream 1
}
