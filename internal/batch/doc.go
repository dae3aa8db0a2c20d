// Package batch packs records into a message body and unpacks them: a uvarint
// count, then each record as uvarint length + bytes.
//
// A batch is the payload of one sluice message (Request.plain in
// api/sluice/v1, or what its zstd and zstd_dict payloads decompress to).
//
// # Format
//
// A body is, with no padding and nothing after the last record:
//
//	body    = magic version count record*
//	magic   = 0xB1          1 byte (Magic)
//	version = 0x01          1 byte (Version)
//	count   = uvarint       number of records, 0 <= count <= MaxRecords
//	record  = length data
//	length  = uvarint       length of data in bytes, may be 0
//	data    = length bytes  the record, opaque to this package
//
// uvarint is encoding/binary's unsigned varint (LEB128: 7 bits a byte, least
// significant group first, high bit set on every byte but the last), in its
// shortest form. Longer encodings of the same number (a final 0x00 byte after
// a continuation byte) are malformed, so a batch has exactly one encoding:
// decoding a body and building it again yields the same bytes. Since count is
// at most MaxRecords (2^24), it takes 1 to 4 bytes, and the header 3 to 6.
//
// The smallest body, an empty batch, is B1 01 00. Two records "a" and "" are
// B1 01 02 01 61 00.
//
// # Decoding
//
// Decode and Count check a whole body before returning anything: magic,
// version, shortest-form varints, a count within MaxRecords, every record
// length within the bytes left, exactly count records, and no trailing bytes.
// Any violation is an error that wraps ErrMalformed and is a *MalformedError
// giving the byte offset and what is wrong. They never panic, whatever the
// input. Decoding is zero-copy: records passed to the callback alias the body.
//
// # Building
//
// A Builder appends records to a reusable buffer and writes the header in
// front of them when asked for the bytes, so after its buffer has grown to the
// working size, building a batch allocates nothing.
package batch
