package frame

import (
	"errors"
	"strings"
	"testing"
)

// TestMalformedFrames: each bad input gives a *DecodeError with the cause,
// the blast radius (Kind) and the ERROR code the spec asks for. Cases cite
// Protocol.md sections.
func TestMalformedFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
		err  error
		kind Kind
		code ErrorCode
	}{
		// Framing.
		{"empty", "", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		{"short header", "0000000110", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		// "Frame Types": 0x00 is reserved; unknown types may be ignored
		// only with I ("Handling Ignore Flag").
		{"reserved type", "00000001 0000", ErrUnknownType, KindConnection, ErrorCodeConnectionError},
		{"unknown type", "00000001 4000", ErrUnknownType, KindConnection, ErrorCodeConnectionError},
		{"unknown type with I", "00000001 4200 ffff", ErrUnknownType, KindIgnore, 0},
		// "Metadata Optional Header": length beyond the frame is invalid.
		{"metadata length > remaining", "00000001 1100 000005 6162", ErrMetadataLength, KindConnection, ErrorCodeConnectionError},
		{"metadata length 2^24-1", "00000001 2920 ffffff", ErrMetadataLength, KindConnection, ErrorCodeConnectionError},
		{"metadata length cut", "00000001 2920 0000", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		{"bad metadata length with I", "00000001 2b20 000009", ErrMetadataLength, KindIgnore, 0},
		// "SETUP Frame" and "Connection Establishment".
		{"setup on stream 1", "00000001 0400 0001 0000 00000001 00000001 00 00", ErrStreamID, KindConnection, ErrorCodeInvalidSetup},
		{"setup keepalive 0", "00000000 0400 0001 0000 00000000 00000001 00 00", ErrInvalidField, KindConnection, ErrorCodeInvalidSetup},
		{"setup keepalive negative", "00000000 0400 0001 0000 80000000 00000001 00 00", ErrInvalidField, KindConnection, ErrorCodeInvalidSetup},
		{"setup lifetime 0", "00000000 0400 0001 0000 00000001 00000000 00 00", ErrInvalidField, KindConnection, ErrorCodeInvalidSetup},
		{"setup truncated fixed", "00000000 0400 0001 0000 00000001", ErrTruncated, KindConnection, ErrorCodeInvalidSetup},
		{"setup token cut", "00000000 0480 0001 0000 00000001 00000001 0005 6162", ErrTruncated, KindConnection, ErrorCodeInvalidSetup},
		{"setup MIME cut", "00000000 0400 0001 0000 00000001 00000001 05 6162", ErrTruncated, KindConnection, ErrorCodeInvalidSetup},
		{"setup no data MIME", "00000000 0400 0001 0000 00000001 00000001 00", ErrTruncated, KindConnection, ErrorCodeInvalidSetup},
		{"setup metadata cut", "00000000 0500 0001 0000 00000001 00000001 00 00 0001", ErrTruncated, KindConnection, ErrorCodeInvalidSetup},
		// "RESUME Frame".
		{"resume on stream 2", "00000002 3400 0001 0000 0000 0000000000000000 0000000000000000", ErrStreamID, KindConnection, ErrorCodeInvalidSetup},
		{"resume token cut", "00000000 3400 0001 0000 0009 6162 0000000000000000", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		{"resume negative position", "00000000 3400 0001 0000 0000 8000000000000000 0000000000000000", ErrInvalidField, KindConnection, ErrorCodeConnectionError},
		{"resume trailing", "00000000 3400 0001 0000 0000 0000000000000000 0000000000000000 00", ErrTrailingBytes, KindConnection, ErrorCodeConnectionError},
		{"resume_ok negative", "00000000 3800 ffffffffffffffff", ErrInvalidField, KindConnection, ErrorCodeConnectionError},
		{"resume_ok short", "00000000 3800 00000000", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		{"resume_ok on stream 1", "00000001 3800 0000000000000000", ErrStreamID, KindIgnore, 0},
		// "KEEPALIVE Frame": 63-bit position, stream 0.
		{"keepalive negative position", "00000000 0c80 8000000000000000", ErrInvalidField, KindConnection, ErrorCodeConnectionError},
		{"keepalive short", "00000000 0c80 00000000", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		{"keepalive on stream 1", "00000001 0c80 0000000000000000", ErrStreamID, KindIgnore, 0},
		// "LEASE Frame".
		{"lease on stream 1", "00000001 0800 00000001 00000001", ErrStreamID, KindIgnore, 0},
		{"lease negative ttl", "00000000 0800 80000000 00000001", ErrInvalidField, KindConnection, ErrorCodeConnectionError},
		{"lease trailing", "00000000 0800 00000001 00000001 00", ErrTrailingBytes, KindConnection, ErrorCodeConnectionError},
		// "Handling the Unexpected": METADATA_PUSH on a non-0 stream, and
		// PAYLOAD, CANCEL, requests on stream 0, are ignored.
		{"metadata_push on stream 1", "00000001 3100 6d", ErrStreamID, KindIgnore, 0},
		{"payload on stream 0", "00000000 2820 64", ErrStreamID, KindIgnore, 0},
		{"cancel on stream 0", "00000000 2400", ErrStreamID, KindIgnore, 0},
		{"request_stream on stream 0", "00000000 1800 00000001", ErrStreamID, KindIgnore, 0},
		// "REQUEST_STREAM", "REQUEST_CHANNEL", "REQUEST_N": N > 0.
		{"request_stream N 0", "00000001 1800 00000000", ErrInvalidN, KindStream, ErrorCodeInvalid},
		{"request_stream N negative", "00000001 1800 ffffffff", ErrInvalidN, KindStream, ErrorCodeInvalid},
		{"request_stream short", "00000001 1800 0000", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		{"request_channel N 0", "00000001 1c00 00000000", ErrInvalidN, KindStream, ErrorCodeInvalid},
		{"request_n 0", "00000001 2000 00000000", ErrInvalidN, KindStream, ErrorCodeInvalid},
		{"request_n negative", "00000001 2000 80000000", ErrInvalidN, KindStream, ErrorCodeInvalid},
		{"request_n short", "00000001 2000 000001", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		{"request_n trailing", "00000001 2000 00000001 00", ErrTrailingBytes, KindConnection, ErrorCodeConnectionError},
		{"request_n 0 with I", "00000001 2200 00000000", ErrInvalidN, KindIgnore, 0},
		{"cancel trailing", "00000001 2400 00", ErrTrailingBytes, KindConnection, ErrorCodeConnectionError},
		// "PAYLOAD Frame": C and N must not both be clear.
		{"payload no N C F", "00000001 2800 64", ErrInvalidFlags, KindStream, ErrorCodeInvalid},
		{"error short", "00000001 2c00 0000", ErrTruncated, KindConnection, ErrorCodeConnectionError},
		// "EXT Frame": extended type > 0.
		{"ext type 0", "00000000 fc00 00000000", ErrInvalidField, KindConnection, ErrorCodeConnectionError},
		{"ext type 0 with I", "00000000 fe00 00000000", ErrInvalidField, KindIgnore, 0},
		{"ext short", "00000000 fc00 0000", ErrTruncated, KindConnection, ErrorCodeConnectionError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(unhex(t, tc.hex))
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err %T is not a *DecodeError", err)
			}
			if de.Kind != tc.kind {
				t.Errorf("kind = %v, want %v (%v)", de.Kind, tc.kind, err)
			}
			if tc.kind != KindIgnore && de.Code != tc.code {
				t.Errorf("code = %v, want %v", de.Code, tc.code)
			}
			if KindOf(err) != tc.kind || IsIgnorable(err) != (tc.kind == KindIgnore) {
				t.Errorf("KindOf/IsIgnorable disagree with %v", de.Kind)
			}
			if !strings.HasPrefix(err.Error(), "rsocket: ") {
				t.Errorf("message %q", err.Error())
			}
		})
	}
}

// TestLenientDecoding: what the spec says to accept.
func TestLenientDecoding(t *testing.T) {
	for _, tc := range []struct{ name, hex string }{
		// "Flag bits not specified for a particular frame MUST be ignored."
		{"cancel with unknown flags", "00000001 241f"},
		{"request_n with M set", "00000001 2100 00000001"},
		// Reserved top bit of the stream id is dropped.
		{"reserved stream bit", "80000001 2400"},
		// LEASE of 0 stops requests ("LEASE Frame").
		{"lease zero", "00000000 0800 00000000 00000000"},
		// METADATA_PUSH without M.
		{"metadata_push without M", "00000000 3000 6d"},
		// ERROR codes are the state machine's business.
		{"error reserved code", "00000001 2c00 00000000"},
		// A middle fragment with F alone.
		{"payload F only", "00000001 2880 64"},
		// SETUP of another version: the server answers UNSUPPORTED_SETUP.
		{"setup version 2.1", "00000000 0400 0002 0001 00000001 00000001 00 00"},
		// SETUP with R and an empty token.
		{"setup empty token", "00000000 0480 0001 0000 00000001 00000001 0000 00 00"},
		// LEASE with M and no metadata bytes.
		{"lease M empty", "00000000 0900 00000001 00000001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Validate(unhex(t, tc.hex)); err != nil {
				t.Fatal(err)
			}
		})
	}
	h, _ := ParseHeader(unhex(t, "80000001 2400"))
	if h.StreamID != 1 {
		t.Errorf("stream id with reserved bit = %d, want 1", h.StreamID)
	}
}

func TestErrorMessages(t *testing.T) {
	for hx, want := range map[string]string{
		"0000":                   "rsocket: frame: frame truncated: 2 bytes, the header needs 6 (connection error)",
		"00000001 1800 00000000": "rsocket: REQUEST_STREAM frame on stream 1: request N must be in 1..2^31-1: N = 0 (stream error)",
		"00000003 3100 6d":       "rsocket: METADATA_PUSH frame on stream 3: frame on the wrong stream: must be on stream 0 (ignore)",
	} {
		if _, err := Validate(unhex(t, hx)); err == nil || err.Error() != want {
			t.Errorf("%s: %v\n want %s", hx, err, want)
		}
	}
}

func TestParseWrongType(t *testing.T) {
	_, err := ParsePayload(unhex(t, "00000004 2400"))
	if !errors.Is(err, ErrWrongType) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseTooLarge(t *testing.T) {
	b := make([]byte, MaxFrameSize+1)
	b[3], b[4] = 1, byte(TypePayload<<2)
	if _, err := Validate(b); !errors.Is(err, ErrFrameTooLarge) || KindOf(err) != KindConnection {
		t.Fatalf("err = %v", err)
	}
}

// TestEncodeRefusesInvalid: encoders do not write what a peer must reject.
func TestEncodeRefusesInvalid(t *testing.T) {
	big := make([]byte, MaxFrameSize)
	for _, tc := range []struct {
		name string
		err  error
		f    func() ([]byte, error)
	}{
		{"payload stream 0", ErrStreamID, func() ([]byte, error) { return AppendPayload(nil, 0, FlagNext, nil, nil) }},
		{"payload stream 2^31", ErrStreamID, func() ([]byte, error) { return AppendPayload(nil, 1<<31, FlagNext, nil, nil) }},
		{"payload no flags", ErrInvalidFlags, func() ([]byte, error) { return AppendPayload(nil, 1, 0, nil, nil) }},
		{"payload too large", ErrFrameTooLarge, func() ([]byte, error) { return AppendPayload(nil, 1, FlagNext, nil, big) }},
		{"request_n 0", ErrInvalidN, func() ([]byte, error) { return AppendRequestN(nil, 1, 0) }},
		{"request_stream 2^31", ErrInvalidN, func() ([]byte, error) { return AppendRequestStream(nil, 1, 0, 1<<31, nil, nil) }},
		{"cancel stream 0", ErrStreamID, func() ([]byte, error) { return AppendCancel(nil, 0) }},
		{"setup keepalive 0", ErrInvalidField, func() ([]byte, error) { return AppendSetup(nil, Setup{MaxLifetime: 1}) }},
		{"setup MIME 256", ErrTooLong, func() ([]byte, error) {
			return AppendSetup(nil, Setup{KeepaliveInterval: 1, MaxLifetime: 1, DataMIME: make([]byte, 256)})
		}},
		{"setup token 65536", ErrTooLong, func() ([]byte, error) {
			return AppendSetup(nil, Setup{KeepaliveInterval: 1, MaxLifetime: 1, ResumeToken: make([]byte, 65536)})
		}},
		{"setup too large", ErrFrameTooLarge, func() ([]byte, error) {
			return AppendSetup(nil, Setup{KeepaliveInterval: 1, MaxLifetime: 1, Data: big})
		}},
		{"keepalive position 2^63", ErrInvalidField, func() ([]byte, error) { return AppendKeepalive(nil, true, 1<<63, nil) }},
		{"lease ttl 2^31", ErrInvalidField, func() ([]byte, error) { return AppendLease(nil, 1<<31, 1, nil) }},
		{"resume token 65536", ErrTooLong, func() ([]byte, error) { return AppendResume(nil, 1, 0, make([]byte, 65536), 0, 0) }},
		{"resume position", ErrInvalidField, func() ([]byte, error) { return AppendResume(nil, 1, 0, nil, 1<<63, 0) }},
		{"resume_ok position", ErrInvalidField, func() ([]byte, error) { return AppendResumeOK(nil, 1<<63) }},
		{"ext type 0", ErrInvalidField, func() ([]byte, error) { return AppendExt(nil, 0, 0, 0, nil, nil) }},
		{"error stream 2^31", ErrStreamID, func() ([]byte, error) { return AppendError(nil, 1<<31, 0x201, "") }},
		{"metadata_push too large", ErrFrameTooLarge, func() ([]byte, error) { return AppendMetadataPush(nil, big) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.f()
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if len(b) != 0 {
				t.Fatalf("wrote %d bytes on error", len(b))
			}
		})
	}
}
