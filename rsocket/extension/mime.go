package extension

import "strconv"

// MIMEType is a well-known MIME type id (Extensions/WellKnownMimeTypes.md):
// a 7-bit number that stands for a MIME string in composite metadata.
type MIMEType uint8

// Well-known MIME types 0x00-0x2A, and the RSocket extension types
// 0x7A-0x7F.
const (
	MIMEApplicationAvro           MIMEType = 0x00
	MIMEApplicationCBOR           MIMEType = 0x01
	MIMEApplicationGraphQL        MIMEType = 0x02
	MIMEApplicationGzip           MIMEType = 0x03
	MIMEApplicationJavascript     MIMEType = 0x04
	MIMEApplicationJSON           MIMEType = 0x05
	MIMEApplicationOctetStream    MIMEType = 0x06
	MIMEApplicationPDF            MIMEType = 0x07
	MIMEApplicationThriftBinary   MIMEType = 0x08
	MIMEApplicationProtobuf       MIMEType = 0x09
	MIMEApplicationXML            MIMEType = 0x0A
	MIMEApplicationZip            MIMEType = 0x0B
	MIMEAudioAAC                  MIMEType = 0x0C
	MIMEAudioMP3                  MIMEType = 0x0D
	MIMEAudioMP4                  MIMEType = 0x0E
	MIMEAudioMPEG3                MIMEType = 0x0F
	MIMEAudioMPEG                 MIMEType = 0x10
	MIMEAudioOGG                  MIMEType = 0x11
	MIMEAudioOpus                 MIMEType = 0x12
	MIMEAudioVorbis               MIMEType = 0x13
	MIMEImageBMP                  MIMEType = 0x14
	MIMEImageGIF                  MIMEType = 0x15
	MIMEImageHEICSequence         MIMEType = 0x16
	MIMEImageHEIC                 MIMEType = 0x17
	MIMEImageHEIFSequence         MIMEType = 0x18
	MIMEImageHEIF                 MIMEType = 0x19
	MIMEImageJPEG                 MIMEType = 0x1A
	MIMEImagePNG                  MIMEType = 0x1B
	MIMEImageTIFF                 MIMEType = 0x1C
	MIMEMultipartMixed            MIMEType = 0x1D
	MIMETextCSS                   MIMEType = 0x1E
	MIMETextCSV                   MIMEType = 0x1F
	MIMETextHTML                  MIMEType = 0x20
	MIMETextPlain                 MIMEType = 0x21
	MIMETextXML                   MIMEType = 0x22
	MIMEVideoH264                 MIMEType = 0x23
	MIMEVideoH265                 MIMEType = 0x24
	MIMEVideoVP8                  MIMEType = 0x25
	MIMEApplicationHessian        MIMEType = 0x26
	MIMEApplicationJavaObject     MIMEType = 0x27
	MIMEApplicationCloudEventJSON MIMEType = 0x28
	MIMEApplicationCapnp          MIMEType = 0x29
	MIMEApplicationFlatbuffers    MIMEType = 0x2A

	MIMERSocketMIMEType        MIMEType = 0x7A // message/x.rsocket.mime-type.v0
	MIMERSocketAcceptMIMETypes MIMEType = 0x7B // message/x.rsocket.accept-mime-types.v0
	MIMERSocketAuthentication  MIMEType = 0x7C // message/x.rsocket.authentication.v0
	MIMERSocketTracingZipkin   MIMEType = 0x7D // message/x.rsocket.tracing-zipkin.v0
	MIMERSocketRouting         MIMEType = 0x7E // message/x.rsocket.routing.v0
	MIMERSocketComposite       MIMEType = 0x7F // message/x.rsocket.composite-metadata.v0

	// MaxMIMEType is the largest id a composite entry can carry (7 bits).
	MaxMIMEType MIMEType = 0x7F
)

// The MIME strings of the extensions, for SETUP's metadata MIME type.
const (
	CompositeMetadataMIME = "message/x.rsocket.composite-metadata.v0"
	RoutingMIME           = "message/x.rsocket.routing.v0"
	AuthenticationMIME    = "message/x.rsocket.authentication.v0"
)

var mimeNames = [128]string{
	0x00: "application/avro",
	0x01: "application/cbor",
	0x02: "application/graphql",
	0x03: "application/gzip",
	0x04: "application/javascript",
	0x05: "application/json",
	0x06: "application/octet-stream",
	0x07: "application/pdf",
	0x08: "application/vnd.apache.thrift.binary",
	0x09: "application/vnd.google.protobuf",
	0x0A: "application/xml",
	0x0B: "application/zip",
	0x0C: "audio/aac",
	0x0D: "audio/mp3",
	0x0E: "audio/mp4",
	0x0F: "audio/mpeg3",
	0x10: "audio/mpeg",
	0x11: "audio/ogg",
	0x12: "audio/opus",
	0x13: "audio/vorbis",
	0x14: "image/bmp",
	0x15: "image/gif",
	0x16: "image/heic-sequence",
	0x17: "image/heic",
	0x18: "image/heif-sequence",
	0x19: "image/heif",
	0x1A: "image/jpeg",
	0x1B: "image/png",
	0x1C: "image/tiff",
	0x1D: "multipart/mixed",
	0x1E: "text/css",
	0x1F: "text/csv",
	0x20: "text/html",
	0x21: "text/plain",
	0x22: "text/xml",
	0x23: "video/H264",
	0x24: "video/H265",
	0x25: "video/VP8",
	0x26: "application/x-hessian",
	0x27: "application/x-java-object",
	0x28: "application/cloudevents+json",
	0x29: "application/x-capnp",
	0x2A: "application/x-flatbuffers",
	0x7A: "message/x.rsocket.mime-type.v0",
	0x7B: "message/x.rsocket.accept-mime-types.v0",
	0x7C: AuthenticationMIME,
	0x7D: "message/x.rsocket.tracing-zipkin.v0",
	0x7E: RoutingMIME,
	0x7F: CompositeMetadataMIME,
}

var mimeByName = func() map[string]MIMEType {
	m := make(map[string]MIMEType, 64)
	for id, name := range mimeNames {
		if name != "" {
			m[name] = MIMEType(id)
		}
	}
	return m
}()

// String returns the MIME string of a well-known id, or "" for an id the
// table does not define (reserved ids are legal on the wire: a reader skips
// entries it does not know).
func (m MIMEType) String() string {
	if int(m) < len(mimeNames) {
		return mimeNames[m]
	}
	return ""
}

// Known reports whether the id is in the well-known table.
func (m MIMEType) Known() bool { return m.String() != "" }

// GoString is for %#v: the id in hex with its name.
func (m MIMEType) GoString() string {
	return "MIMEType(0x" + strconv.FormatUint(uint64(m), 16) + " " + strconv.Quote(m.String()) + ")"
}

// LookupMIME returns the well-known id of a MIME string. The match is exact
// (case-sensitive), as in rsocket-java's WellKnownMimeType.fromString.
func LookupMIME(name string) (MIMEType, bool) {
	id, ok := mimeByName[name]
	return id, ok
}
