package frame

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// Golden frames, computed by hand from rsocket/rsocket Protocol.md (commit
// 0f6e555). Header: 4 bytes stream id, then 2 bytes type<<10 | flags, so the
// second pair of header bytes for type T without flags is T<<2 in the high
// byte (SETUP 0x04.., LEASE 0x08.., PAYLOAD 0x28.., EXT 0xfc..). Flags:
// I 0x200, M 0x100, F/R 0x080, C/L 0x040, N 0x020.

type golden struct {
	name   string
	hex    string                       // the frame, spaces ignored
	encode func([]byte) ([]byte, error) // must produce hex
	parse  func([]byte) (any, error)    // must give want
	want   any
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func p[T any](f func([]byte) (T, error)) func([]byte) (any, error) {
	return func(b []byte) (any, error) { return f(b) }
}

func goldens() []golden {
	return []golden{
		// SETUP (Protocol.md "SETUP Frame"): M|R|L = 0x1c0 -> 0x05c0; version
		// 1.0; keepalive 500 ms; lifetime 90,000 ms; token "tk" (u16
		// length); MIME "a/b" and "c" (u8 lengths); metadata "md" with
		// 24-bit length; data "d".
		{
			name: "setup/resume+lease+metadata",
			hex:  "00000000 05c0 0001 0000 000001f4 00015f90 0002 746b 03 612f62 01 63 000002 6d64 64",
			encode: func(b []byte) ([]byte, error) {
				return AppendSetup(b, Setup{Header: Header{Flags: FlagLease}, MajorVersion: 1, KeepaliveInterval: 500,
					MaxLifetime: 90000, ResumeToken: []byte("tk"), MetadataMIME: []byte("a/b"), DataMIME: []byte("c"),
					Metadata: []byte("md"), Data: []byte("d")})
			},
			parse: p(ParseSetup),
			want: Setup{Header: Header{0, TypeSetup, FlagMetadata | FlagResume | FlagLease}, MajorVersion: 1,
				KeepaliveInterval: 500, MaxLifetime: 90000, ResumeToken: []byte("tk"), MetadataMIME: []byte("a/b"),
				DataMIME: []byte("c"), Metadata: []byte("md"), Data: []byte("d")},
		},
		// SETUP without flags: no token field at all, empty MIME types, no
		// metadata length; keepalive 1 ms and lifetime 2^31-1 ms (bounds).
		{
			name: "setup/minimal",
			hex:  "00000000 0400 0001 0000 00000001 7fffffff 00 00",
			encode: func(b []byte) ([]byte, error) {
				return AppendSetup(b, Setup{MajorVersion: 1, KeepaliveInterval: 1, MaxLifetime: 1<<31 - 1})
			},
			parse: p(ParseSetup),
			want: Setup{Header: Header{0, TypeSetup, 0}, MajorVersion: 1, KeepaliveInterval: 1, MaxLifetime: 1<<31 - 1,
				MetadataMIME: []byte{}, DataMIME: []byte{}, Data: []byte{}},
		},
		// LEASE: TTL 1000 ms, 5 requests, metadata "m" without a length.
		{
			name:   "lease/metadata",
			hex:    "00000000 0900 000003e8 00000005 6d",
			encode: func(b []byte) ([]byte, error) { return AppendLease(b, 1000, 5, []byte("m")) },
			parse:  p(ParseLease),
			want:   Lease{Header: Header{0, TypeLease, FlagMetadata}, TTL: 1000, NumberOfRequests: 5, Metadata: []byte("m")},
		},
		{
			name:   "lease/plain",
			hex:    "00000000 0800 000003e8 00000005",
			encode: func(b []byte) ([]byte, error) { return AppendLease(b, 1000, 5, nil) },
			parse:  p(ParseLease),
			want:   Lease{Header: Header{0, TypeLease, 0}, TTL: 1000, NumberOfRequests: 5},
		},
		// KEEPALIVE with R (0x080): 63-bit position, data "hi".
		{
			name:   "keepalive/respond",
			hex:    "00000000 0c80 0102030405060708 6869",
			encode: func(b []byte) ([]byte, error) { return AppendKeepalive(b, true, 0x0102030405060708, []byte("hi")) },
			parse:  p(ParseKeepalive),
			want:   Keepalive{Header: Header{0, TypeKeepalive, FlagRespond}, LastReceivedPosition: 0x0102030405060708, Data: []byte("hi")},
		},
		{
			name:   "keepalive/echo",
			hex:    "00000000 0c00 0000000000000000",
			encode: func(b []byte) ([]byte, error) { return AppendKeepalive(b, false, 0, nil) },
			parse:  p(ParseKeepalive),
			want:   Keepalive{Header: Header{0, TypeKeepalive, 0}, Data: []byte{}},
		},
		// REQUEST_RESPONSE stream 1, M: metadata "ab" (length 2), data "cd".
		{
			name:   "request_response/metadata",
			hex:    "00000001 1100 000002 6162 6364",
			encode: func(b []byte) ([]byte, error) { return AppendRequestResponse(b, 1, 0, []byte("ab"), []byte("cd")) },
			parse:  p(ParseRequestResponse),
			want:   RequestResponse{Header: Header{1, TypeRequestResponse, FlagMetadata}, Metadata: []byte("ab"), Data: []byte("cd")},
		},
		{
			name:   "request_response/follows",
			hex:    "00000003 1080 64",
			encode: func(b []byte) ([]byte, error) { return AppendRequestResponse(b, 3, FlagFollows, nil, []byte("d")) },
			parse:  p(ParseRequestResponse),
			want:   RequestResponse{Header: Header{3, TypeRequestResponse, FlagFollows}, Data: []byte("d")},
		},
		{
			name:   "request_fnf",
			hex:    "00000005 1400 78",
			encode: func(b []byte) ([]byte, error) { return AppendRequestFNF(b, 5, 0, nil, []byte("x")) },
			parse:  p(ParseRequestFNF),
			want:   RequestFNF{Header: Header{5, TypeRequestFNF, 0}, Data: []byte("x")},
		},
		// REQUEST_STREAM: N = 2^31-1 (the largest, not "unbounded"), M with
		// empty metadata (length 0 is still written), data "q".
		{
			name:   "request_stream/max_n",
			hex:    "00000007 1900 7fffffff 000000 71",
			encode: func(b []byte) ([]byte, error) { return AppendRequestStream(b, 7, 0, 1<<31-1, []byte{}, []byte("q")) },
			parse:  p(ParseRequestStream),
			want:   RequestStream{Header: Header{7, TypeRequestStream, FlagMetadata}, InitialN: 1<<31 - 1, Metadata: []byte{}, Data: []byte("q")},
		},
		// REQUEST_CHANNEL with C (0x040), N = 1, nothing else.
		{
			name:   "request_channel/complete",
			hex:    "00000009 1c40 00000001",
			encode: func(b []byte) ([]byte, error) { return AppendRequestChannel(b, 9, FlagComplete, 1, nil, nil) },
			parse:  p(ParseRequestChannel),
			want:   RequestChannel{Header: Header{9, TypeRequestChannel, FlagComplete}, InitialN: 1, Data: []byte{}},
		},
		{
			name:   "request_n",
			hex:    "00000002 2000 00000010",
			encode: func(b []byte) ([]byte, error) { return AppendRequestN(b, 2, 16) },
			parse:  p(ParseRequestN),
			want:   RequestN{Header: Header{2, TypeRequestN, 0}, N: 16},
		},
		{
			name:   "cancel",
			hex:    "00000004 2400",
			encode: func(b []byte) ([]byte, error) { return AppendCancel(b, 4) },
			parse:  p(ParseCancel),
			want:   Cancel{Header: Header{4, TypeCancel, 0}},
		},
		// PAYLOAD M|C|N = 0x160.
		{
			name: "payload/next+complete",
			hex:  "00000001 2960 000001 6d 64",
			encode: func(b []byte) ([]byte, error) {
				return AppendPayload(b, 1, FlagNext|FlagComplete, []byte("m"), []byte("d"))
			},
			parse: p(ParsePayload),
			want:  Payload{Header: Header{1, TypePayload, FlagMetadata | FlagComplete | FlagNext}, Metadata: []byte("m"), Data: []byte("d")},
		},
		{
			name:   "payload/complete",
			hex:    "00000001 2840",
			encode: func(b []byte) ([]byte, error) { return AppendPayload(b, 1, FlagComplete, nil, nil) },
			parse:  p(ParsePayload),
			want:   Payload{Header: Header{1, TypePayload, FlagComplete}, Data: []byte{}},
		},
		{
			name:   "payload/fragment",
			hex:    "00000001 28a0 61",
			encode: func(b []byte) ([]byte, error) { return AppendPayload(b, 1, FlagFollows|FlagNext, nil, []byte("a")) },
			parse:  p(ParsePayload),
			want:   Payload{Header: Header{1, TypePayload, FlagFollows | FlagNext}, Data: []byte("a")},
		},
		// ERROR: u32 code, UTF-8 message.
		{
			name:   "error/connection",
			hex:    "00000000 2c00 00000101 626164",
			encode: func(b []byte) ([]byte, error) { return AppendError(b, 0, ErrorCodeConnectionError, "bad") },
			parse:  p(ParseError),
			want:   ErrorFrame{Header: Header{0, TypeError, 0}, Code: ErrorCodeConnectionError, Data: []byte("bad")},
		},
		{
			name:   "error/application",
			hex:    "00000003 2c00 00000201",
			encode: func(b []byte) ([]byte, error) { return AppendError(b, 3, ErrorCodeApplicationError, "") },
			parse:  p(ParseError),
			want:   ErrorFrame{Header: Header{3, TypeError, 0}, Code: ErrorCodeApplicationError, Data: []byte{}},
		},
		// METADATA_PUSH: M always set, no metadata length.
		{
			name:   "metadata_push",
			hex:    "00000000 3100 6d70",
			encode: func(b []byte) ([]byte, error) { return AppendMetadataPush(b, []byte("mp")) },
			parse:  p(ParseMetadataPush),
			want:   MetadataPush{Header: Header{0, TypeMetadataPush, FlagMetadata}, Metadata: []byte("mp")},
		},
		// RESUME: version 1.0, u16 token length 3 "tok", last received
		// server position 5, first available client position 2.
		{
			name:   "resume",
			hex:    "00000000 3400 0001 0000 0003 746f6b 0000000000000005 0000000000000002",
			encode: func(b []byte) ([]byte, error) { return AppendResume(b, 1, 0, []byte("tok"), 5, 2) },
			parse:  p(ParseResume),
			want: Resume{Header: Header{0, TypeResume, 0}, MajorVersion: 1, ResumeToken: []byte("tok"),
				LastReceivedServerPosition: 5, FirstAvailableClientPosition: 2},
		},
		{
			name:   "resume_ok",
			hex:    "00000000 3800 000000000000002a",
			encode: func(b []byte) ([]byte, error) { return AppendResumeOK(b, 42) },
			parse:  p(ParseResumeOK),
			want:   ResumeOK{Header: Header{0, TypeResumeOK, 0}, LastReceivedClientPosition: 42},
		},
		// EXT 0x3f -> 0xfc00; I = 0x200 -> 0xfe00; I|M -> 0xff00.
		{
			name:   "ext/ignore",
			hex:    "00000000 fe00 00000001 65",
			encode: func(b []byte) ([]byte, error) { return AppendExt(b, 0, FlagIgnore, 1, nil, []byte("e")) },
			parse:  p(ParseExt),
			want:   Ext{Header: Header{0, TypeExt, FlagIgnore}, ExtendedType: 1, Data: []byte("e")},
		},
		{
			name:   "ext/metadata",
			hex:    "00000001 ff00 00000007 000001 61 62",
			encode: func(b []byte) ([]byte, error) { return AppendExt(b, 1, FlagIgnore, 7, []byte("a"), []byte("b")) },
			parse:  p(ParseExt),
			want:   Ext{Header: Header{1, TypeExt, FlagIgnore | FlagMetadata}, ExtendedType: 7, Metadata: []byte("a"), Data: []byte("b")},
		},
	}
}

func TestGoldenFrames(t *testing.T) {
	seen := map[Type]bool{}
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			want := unhex(t, g.hex)
			got, err := g.encode(nil)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encode:\n got %x\nwant %x", got, want)
			}
			v, err := g.parse(want)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !reflect.DeepEqual(v, g.want) {
				t.Fatalf("parse:\n got %+v\nwant %+v", v, g.want)
			}
			h, err := Validate(want)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			seen[h.Type] = true
			if n := Size(h.Type, metadataOf(v), dataOf(v)); h.Type != TypeSetup && h.Type != TypeResume &&
				h.Type != TypeError && h.Type != TypeMetadataPush && n != len(want) {
				t.Errorf("Size = %d, frame is %d bytes", n, len(want))
			}
			// Appending after existing bytes leaves them alone.
			prefix := []byte("xyz")
			got2, err := g.encode(prefix)
			if err != nil || !bytes.Equal(got2[:3], []byte("xyz")) || !bytes.Equal(got2[3:], want) {
				t.Fatalf("encode after a prefix: %x, %v", got2, err)
			}
		})
	}
	for _, typ := range []Type{TypeSetup, TypeLease, TypeKeepalive, TypeRequestResponse, TypeRequestFNF,
		TypeRequestStream, TypeRequestChannel, TypeRequestN, TypeCancel, TypePayload, TypeError,
		TypeMetadataPush, TypeResume, TypeResumeOK, TypeExt} {
		if !seen[typ] {
			t.Errorf("no golden frame for %v", typ)
		}
	}
}

func metadataOf(v any) []byte {
	f := reflect.ValueOf(v).FieldByName("Metadata")
	if !f.IsValid() {
		return nil
	}
	return f.Bytes()
}

func dataOf(v any) []byte {
	f := reflect.ValueOf(v).FieldByName("Data")
	if !f.IsValid() {
		return nil
	}
	return f.Bytes()
}

// TestParsedSlicesAreCapped checks that appending to a view's metadata does
// not overwrite the data that follows it in the frame.
func TestParsedSlicesAreCapped(t *testing.T) {
	b := unhex(t, "00000001 1100 000002 6162 6364")
	r, err := ParseRequestResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(r.Metadata, 'X')
	if !bytes.Equal(r.Data, []byte("cd")) {
		t.Fatalf("data overwritten: %q", r.Data)
	}
}

func TestTypeAndCodeNames(t *testing.T) {
	names := map[Type]string{TypeSetup: "SETUP", TypeLease: "LEASE", TypeKeepalive: "KEEPALIVE",
		TypeRequestResponse: "REQUEST_RESPONSE", TypeRequestFNF: "REQUEST_FNF", TypeRequestStream: "REQUEST_STREAM",
		TypeRequestChannel: "REQUEST_CHANNEL", TypeRequestN: "REQUEST_N", TypeCancel: "CANCEL", TypePayload: "PAYLOAD",
		TypeError: "ERROR", TypeMetadataPush: "METADATA_PUSH", TypeResume: "RESUME", TypeResumeOK: "RESUME_OK",
		TypeExt: "EXT", TypeReserved: "RESERVED", 0x20: "UNKNOWN(0x20)"}
	for typ, want := range names {
		if got := typ.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", typ, got, want)
		}
	}
	codes := map[ErrorCode]string{0x001: "INVALID_SETUP", 0x002: "UNSUPPORTED_SETUP", 0x003: "REJECTED_SETUP",
		0x004: "REJECTED_RESUME", 0x101: "CONNECTION_ERROR", 0x102: "CONNECTION_CLOSE", 0x201: "APPLICATION_ERROR",
		0x202: "REJECTED", 0x203: "CANCELED", 0x204: "INVALID", 0: "RESERVED", 0xFFFFFFFF: "RESERVED_EXTENSION",
		0x301: "APPLICATION(0x301)", 0xFFFFFFFE: "APPLICATION(0xfffffffe)", 0x205: "UNKNOWN(0x205)"}
	for c, want := range codes {
		if got := c.String(); got != want {
			t.Errorf("0x%x.String() = %q, want %q", uint32(c), got, want)
		}
	}
	if !ErrorCodeConnectionClose.IsConnectionScoped() || ErrorCodeApplicationError.IsConnectionScoped() {
		t.Error("IsConnectionScoped wrong")
	}
}

// TestIsResumable pins the resume-position rule (rsocket-java's): every
// frame type on a stream other than 0 counts, EXT included; nothing on
// stream 0 does (SETUP, LEASE, KEEPALIVE, METADATA_PUSH, RESUME, RESUME_OK,
// a connection ERROR, EXT on stream 0).
func TestIsResumable(t *testing.T) {
	for typ := Type(0); typ < 64; typ++ {
		for _, id := range []uint32{1, 2, MaxStreamID} {
			if !IsResumable(typ, id) {
				t.Errorf("IsResumable(%v, %d) = false; every frame on a stream counts", typ, id)
			}
		}
		if IsResumable(typ, 0) {
			t.Errorf("IsResumable(%v, 0) = true; stream 0 never counts", typ)
		}
	}
}

func TestSizes(t *testing.T) {
	// A fragment cut with MaxFragmentPayload fills a frame exactly.
	for _, tc := range []struct {
		t  Type
		md bool
	}{{TypePayload, true}, {TypePayload, false}, {TypeRequestStream, true}, {TypeRequestChannel, false},
		{TypeRequestResponse, true}, {TypeRequestFNF, false}} {
		n := MaxFragmentPayload(tc.t, tc.md, 0)
		var md, data []byte
		if tc.md {
			md = make([]byte, n/2)
			data = make([]byte, n-n/2)
		} else {
			data = make([]byte, n)
		}
		var b []byte
		var err error
		switch tc.t {
		case TypePayload:
			b, err = AppendPayload(nil, 1, FlagNext, md, data)
		case TypeRequestStream:
			b, err = AppendRequestStream(nil, 1, 0, 1, md, data)
		case TypeRequestChannel:
			b, err = AppendRequestChannel(nil, 1, 0, 1, md, data)
		case TypeRequestResponse:
			b, err = AppendRequestResponse(nil, 1, 0, md, data)
		case TypeRequestFNF:
			b, err = AppendRequestFNF(nil, 1, 0, md, data)
		}
		if err != nil || len(b) != MaxFrameSize {
			t.Errorf("%v md=%v: %d bytes, err %v; want exactly MaxFrameSize", tc.t, tc.md, len(b), err)
		}
		if Size(tc.t, md, data) != len(b) {
			t.Errorf("%v: Size %d != %d", tc.t, Size(tc.t, md, data), len(b))
		}
		// One more byte is refused, not silently written.
		if _, err := AppendPayload(nil, 1, FlagNext, md, append(data, 0)); tc.t == TypePayload && err == nil {
			t.Errorf("%v: frame over MaxFrameSize accepted", tc.t)
		}
	}
	if got := MaxFragmentPayload(TypePayload, true, 1000); got != 1000-6-3 {
		t.Errorf("MaxFragmentPayload(PAYLOAD, md, 1000) = %d", got)
	}
	if got := MaxFragmentPayload(TypeRequestStream, true, 5); got != 0 {
		t.Errorf("MaxFragmentPayload too small = %d, want 0", got)
	}
}

// TestFlagAccessors: the flag helpers on the views, including "A PAYLOAD
// with both F and C flags set, implicitly ignores the F flag" (Protocol.md
// "Handling the Unexpected").
func TestFlagAccessors(t *testing.T) {
	p, err := ParsePayload(unhex(t, "00000001 28c0"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Follows() || !p.Complete() || p.Next() {
		t.Errorf("F|C payload: follows=%v complete=%v next=%v", p.Follows(), p.Complete(), p.Next())
	}
	s, _ := ParseSetup(unhex(t, "00000000 05c0 0001 0000 000001f4 00015f90 0002 746b 03 612f62 01 63 000002 6d64 64"))
	if !s.Lease() || !s.ResumeEnabled() || !s.HasMetadata() || s.CanIgnore() {
		t.Errorf("setup flags: %+v", s.Header)
	}
	k, _ := ParseKeepalive(unhex(t, "00000000 0c80 0000000000000000"))
	if !k.Respond() {
		t.Error("keepalive R")
	}
	c, _ := ParseRequestChannel(unhex(t, "00000009 1cc0 00000001"))
	if !c.Follows() || !c.Complete() || !c.Resumable() {
		t.Error("request channel F|C")
	}
	e, _ := ParseError(unhex(t, "00000000 2c00 00000101 626164"))
	if e.Message() != "bad" || e.Resumable() {
		t.Error("error frame")
	}
}
