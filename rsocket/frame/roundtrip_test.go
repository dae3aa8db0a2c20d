package frame

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
)

// parseAny parses b with the Parse function of its type.
func parseAny(b []byte) (any, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	switch h.Type {
	case TypeSetup:
		return ParseSetup(b)
	case TypeLease:
		return ParseLease(b)
	case TypeKeepalive:
		return ParseKeepalive(b)
	case TypeRequestResponse:
		return ParseRequestResponse(b)
	case TypeRequestFNF:
		return ParseRequestFNF(b)
	case TypeRequestStream:
		return ParseRequestStream(b)
	case TypeRequestChannel:
		return ParseRequestChannel(b)
	case TypeRequestN:
		return ParseRequestN(b)
	case TypeCancel:
		return ParseCancel(b)
	case TypePayload:
		return ParsePayload(b)
	case TypeError:
		return ParseError(b)
	case TypeMetadataPush:
		return ParseMetadataPush(b)
	case TypeResume:
		return ParseResume(b)
	case TypeResumeOK:
		return ParseResumeOK(b)
	case TypeExt:
		return ParseExt(b)
	}
	_, err = Validate(b)
	return nil, err
}

// encodeAny encodes a view with the Append function of its type.
func encodeAny(dst []byte, v any) ([]byte, error) {
	switch f := v.(type) {
	case Setup:
		return AppendSetup(dst, f)
	case Lease:
		return AppendLease(dst, f.TTL, f.NumberOfRequests, f.Metadata)
	case Keepalive:
		return AppendKeepalive(dst, f.Respond(), f.LastReceivedPosition, f.Data)
	case RequestResponse:
		return AppendRequestResponse(dst, f.StreamID, f.Flags, f.Metadata, f.Data)
	case RequestFNF:
		return AppendRequestFNF(dst, f.StreamID, f.Flags, f.Metadata, f.Data)
	case RequestStream:
		return AppendRequestStream(dst, f.StreamID, f.Flags, f.InitialN, f.Metadata, f.Data)
	case RequestChannel:
		return AppendRequestChannel(dst, f.StreamID, f.Flags, f.InitialN, f.Metadata, f.Data)
	case RequestN:
		return AppendRequestN(dst, f.StreamID, f.N)
	case Cancel:
		return AppendCancel(dst, f.StreamID)
	case Payload:
		return AppendPayload(dst, f.StreamID, f.Flags, f.Metadata, f.Data)
	case ErrorFrame:
		return AppendError(dst, f.StreamID, f.Code, string(f.Data))
	case MetadataPush:
		return AppendMetadataPush(dst, f.Metadata)
	case Resume:
		return AppendResume(dst, f.MajorVersion, f.MinorVersion, f.ResumeToken, f.LastReceivedServerPosition, f.FirstAvailableClientPosition)
	case ResumeOK:
		return AppendResumeOK(dst, f.LastReceivedClientPosition)
	case Ext:
		return AppendExt(dst, f.StreamID, f.Flags, f.ExtendedType, f.Metadata, f.Data)
	}
	return dst, errors.New("unknown view")
}

// keptFlags are the flag bits an Append function takes from its caller for
// each type; the others are derived or always 0.
func keptFlags(t Type) Flags {
	switch t {
	case TypeSetup, TypeRequestResponse, TypeRequestFNF, TypeRequestStream, TypeRequestChannel, TypePayload, TypeExt:
		return flagMask
	case TypeLease:
		return FlagMetadata
	case TypeKeepalive:
		return FlagRespond
	}
	return 0
}

// normalize returns v as an Append function would reproduce it.
func normalize(v any) any {
	rv := reflect.New(reflect.TypeOf(v)).Elem()
	rv.Set(reflect.ValueOf(v))
	h := rv.FieldByName("Header")
	hd := h.Interface().(Header)
	hd.Flags &= keptFlags(hd.Type)
	if hd.Type == TypeMetadataPush {
		hd.Flags = FlagMetadata
	}
	h.Set(reflect.ValueOf(hd))
	return rv.Interface()
}

// checkRoundTrip: a frame that parses re-encodes to a frame that parses to
// the same view (modulo flags the encoder owns), and that second encoding is
// byte-stable.
func checkRoundTrip(t testing.TB, b []byte) {
	v, err := parseAny(b)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) || de.Kind == 0 || de.Err == nil {
			t.Fatalf("error %v (%T) is not a classified *DecodeError", err, err)
		}
		return
	}
	if _, err := Validate(b); err != nil {
		t.Fatalf("parses but Validate says %v", err)
	}
	b2, err := encodeAny(nil, v)
	if err != nil {
		t.Fatalf("re-encoding %+v: %v", v, err)
	}
	v2, err := parseAny(b2)
	if err != nil {
		t.Fatalf("re-encoded frame %x does not parse: %v", b2, err)
	}
	if want := normalize(v); !reflect.DeepEqual(v2, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", v2, want)
	}
	b3, _ := encodeAny(nil, v2)
	if !bytes.Equal(b2, b3) {
		t.Fatalf("encoding not stable: %x then %x", b2, b3)
	}
}

func randBytes(r *rand.Rand, max int) []byte {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, r.IntN(max+1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// randomFrame builds a valid random frame of a random type.
func randomFrame(r *rand.Rand) (any, []byte, error) {
	stream := 1 + r.Uint32N(MaxStreamID)
	flags := Flags(r.Uint32N(1024))
	n := 1 + r.Uint32N(max31)
	pos := r.Uint64N(MaxPosition + 1)
	md, data := randBytes(r, 64), randBytes(r, 64)
	var v any
	switch r.IntN(15) {
	case 0:
		s := Setup{Header: Header{Flags: flags}, MajorVersion: uint16(r.Uint32()), MinorVersion: uint16(r.Uint32()),
			KeepaliveInterval: 1 + r.Uint32N(max31), MaxLifetime: 1 + r.Uint32N(max31), ResumeToken: randBytes(r, 40),
			MetadataMIME: randBytes(r, 255), DataMIME: randBytes(r, 255), Metadata: md, Data: data}
		if s.MetadataMIME == nil {
			s.MetadataMIME = []byte{}
		}
		if s.DataMIME == nil {
			s.DataMIME = []byte{}
		}
		v = s
	case 1:
		v = Lease{TTL: r.Uint32N(max31 + 1), NumberOfRequests: r.Uint32N(max31 + 1), Metadata: md}
	case 2:
		v = Keepalive{Header: Header{Flags: flags & FlagRespond}, LastReceivedPosition: pos, Data: data}
	case 3:
		v = RequestResponse{Header: Header{StreamID: stream, Flags: flags}, Metadata: md, Data: data}
	case 4:
		v = RequestFNF{Header: Header{StreamID: stream, Flags: flags}, Metadata: md, Data: data}
	case 5:
		v = RequestStream{Header: Header{StreamID: stream, Flags: flags}, InitialN: n, Metadata: md, Data: data}
	case 6:
		v = RequestChannel{Header: Header{StreamID: stream, Flags: flags}, InitialN: n, Metadata: md, Data: data}
	case 7:
		v = RequestN{Header: Header{StreamID: stream}, N: n}
	case 8:
		v = Cancel{Header: Header{StreamID: stream}}
	case 9:
		v = Payload{Header: Header{StreamID: stream, Flags: flags | FlagNext}, Metadata: md, Data: data}
	case 10:
		v = ErrorFrame{Header: Header{StreamID: stream * r.Uint32N(2)}, Code: ErrorCode(r.Uint32()), Data: data}
	case 11:
		v = MetadataPush{Metadata: md}
	case 12:
		v = Resume{MajorVersion: 1, ResumeToken: randBytes(r, 40), LastReceivedServerPosition: pos,
			FirstAvailableClientPosition: r.Uint64N(MaxPosition + 1)}
	case 13:
		v = ResumeOK{LastReceivedClientPosition: pos}
	case 14:
		v = Ext{Header: Header{StreamID: stream * r.Uint32N(2), Flags: flags}, ExtendedType: 1 + r.Uint32N(max31), Metadata: md, Data: data}
	}
	b, err := encodeAny(nil, v)
	return v, b, err
}

// TestRandomRoundTrip: random valid frames encode, decode to the same
// fields, re-encode to the same bytes.
func TestRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		v, b, err := randomFrame(r)
		if err != nil {
			t.Fatalf("encode %+v: %v", v, err)
		}
		got, err := parseAny(b)
		if err != nil {
			t.Fatalf("parse %x (from %+v): %v", b, v, err)
		}
		if !sameFields(got, v) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, v)
		}
		checkRoundTrip(t, b)
	}
}

// sameFields compares a parsed view with the view it was encoded from: the
// parser fills in Type and the derived flags, and nil and empty slices both
// mean "no bytes" except for Metadata and ResumeToken, where nil means
// absent.
func sameFields(got, want any) bool {
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	if g.Type() != w.Type() {
		return false
	}
	for i := 0; i < g.NumField(); i++ {
		name := g.Type().Field(i).Name
		gf, wf := g.Field(i), w.Field(i)
		switch name {
		case "Header":
			gh, wh := gf.Interface().(Header), wf.Interface().(Header)
			if gh.StreamID != wh.StreamID {
				return false
			}
			mask := keptFlags(gh.Type) &^ (FlagMetadata | FlagResume*boolFlag(gh.Type == TypeSetup))
			if gh.Flags&mask != wh.Flags&mask {
				return false
			}
		case "Metadata", "ResumeToken":
			if (name == "ResumeToken" && g.Type() == reflect.TypeOf(Resume{})) ||
				(name == "Metadata" && g.Type() == reflect.TypeOf(MetadataPush{})) {
				// Always present in these frames: nil encodes as empty.
				if !bytes.Equal(gf.Bytes(), wf.Bytes()) {
					return false
				}
				continue
			}
			if gf.IsNil() != wf.IsNil() || !bytes.Equal(gf.Bytes(), wf.Bytes()) {
				return false
			}
		default:
			if gf.Kind() == reflect.Slice {
				if !bytes.Equal(gf.Bytes(), wf.Bytes()) {
					return false
				}
			} else if !gf.Equal(wf) {
				return false
			}
		}
	}
	return true
}

func boolFlag(b bool) Flags {
	if b {
		return 1
	}
	return 0
}

// TestLengthPrefix: write frames with a prefix, read them back in one
// reusable buffer, and refuse oversize frames before reading them.
func TestLengthPrefix(t *testing.T) {
	var stream []byte
	var want [][]byte
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		_, f, err := randomFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			stream, _ = AppendLengthPrefix(stream, len(f))
			stream = append(stream, f...)
		} else {
			at := len(stream)
			stream = ReserveLengthPrefix(stream)
			stream = append(stream, f...)
			if err := SetLengthPrefix(stream, at); err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, f)
	}
	rd := bytes.NewReader(stream)
	buf := make([]byte, 0, 16)
	for i, w := range want {
		got, err := ReadLengthPrefixed(rd, buf, 0)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("frame %d: got %x want %x", i, got, w)
		}
		buf = got
	}
	if _, err := ReadLengthPrefixed(rd, buf, 0); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
	// A frame cut short.
	if _, err := ReadLengthPrefixed(bytes.NewReader([]byte{0, 0, 9, 1, 2}), nil, 0); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut frame: %v", err)
	}
	if _, err := ReadLengthPrefixed(bytes.NewReader([]byte{0, 0}), nil, 0); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut prefix: %v", err)
	}
	// Over the caller's limit: refused without reading (or allocating) the body.
	lr := &countingReader{r: bytes.NewReader([]byte{0x00, 0x10, 0x00})}
	if _, err := ReadLengthPrefixed(lr, nil, 1024); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	if lr.n != 3 {
		t.Fatalf("read %d bytes of an oversize frame, want only the 3-byte prefix", lr.n)
	}
	if _, err := AppendLengthPrefix(nil, MaxFrameSize+1); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("AppendLengthPrefix over max: %v", err)
	}
	if err := SetLengthPrefix([]byte{0, 0}, 0); err == nil {
		t.Fatal("SetLengthPrefix on a short buffer accepted")
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
