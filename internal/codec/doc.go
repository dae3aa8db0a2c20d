// Package codec compresses message bodies with zstd, optionally with a trained
// dictionary, and decompresses them with a bound on the output size so a
// hostile or corrupt payload cannot exhaust memory.
//
// It implements the three batch encodings of the wire protocol
// (api/sluice/v1: Request.plain, Request.zstd and Request.zstd_dict, see
// Kind) and the dictionaries behind the last one (Request.dictionary, see
// Dictionary, Train and ParseDictionary).
//
// # Messages
//
// Every compressed message is exactly one zstd frame made by a stateless
// EncodeAll: it depends on nothing but itself and, for ZstdDict, its
// dictionary, so it stays decodable alone after it has been stored, resent
// or reordered. Frames carry the content size and a content checksum, so a
// Decoder refuses an oversized frame from its header before allocating
// anything and notices corruption that still parses.
//
// A Decoder accepts only what an Encoder produces (or any other zstd encoder
// producing the same shape): one frame, no skippable frames, nothing after
// the frame, and a frame dictionary id that is 0 or the one the message
// names. The last rule keeps a message labelled with one dictionary from
// being silently decoded with another one the Decoder happens to hold.
//
// # Errors
//
// Decode never panics, whatever its input. Its errors wrap one of
// ErrUnknownDictionary (retryable once the dictionary is uploaded),
// ErrTooLarge (the output would exceed the Decoder's limit) or ErrCorrupt
// (anything else wrong with the payload; it also wraps zstd's own error).
// Test for them with errors.Is.
//
// # Concurrency and reuse
//
// Neither an Encoder nor a Decoder is safe for concurrent use: give each
// goroutine its own. Both keep their zstd state and buffers between calls,
// so in steady state Encode and Decode do not allocate when dst has room.
// On the sink, one Decoder per agent stream also matches the protocol:
// dictionary ids are scoped to an agent, so two agents may use the same id
// for different dictionaries.
package codec
