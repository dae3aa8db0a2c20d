// Package seglog is sluice's durable, append-only, segmented log of records
// addressed by uint64 offsets. The agent's spool and the sink's embedded store
// are both a seglog.
//
// # Records
//
// Every record is framed as follows (integers little-endian), and the frame is
// padded with zero bytes to a multiple of 8 so that a length field never
// straddles a sector boundary:
//
//	0   uint32  body length in bytes
//	4   uint8   format version (1)
//	5   uint8   record type (1 = data, 2 = gap)
//	6   uint16  reserved, zero
//	8   uint64  offset of this record
//	16  uint32  CRC-32C (Castagnoli) of bytes 0..15 followed by the body
//	20  body
//	..  zero padding up to the next multiple of 8
//
// The offset is inside the checksummed header, so a record copied to the wrong
// place, or a stale record left behind by an earlier truncation, fails
// validation instead of being returned under a wrong offset.
//
// A gap frame (type 2, an 8-byte body holding a count) says that the count
// offsets from its own have no record: Repair writes one where it removed
// damaged records, so that every record after the damage keeps its offset.
// Open and iterators skip gaps; readers see the offsets jump.
//
// # Segments
//
// Records live in segment files named "%020d.seg" after the offset of their
// first record. The last segment is the active one; when an append would grow
// it past SegmentBytes, it is sealed (synced, its sparse index written to
// "%020d.idx") and a new segment begins. The index holds one (offset, byte
// position) pair about every IndexIntervalBytes and ends with a checksummed
// trailer; it is only an accelerator and is rebuilt from the segment whenever
// it is missing or does not match.
//
// RemoveBefore deletes segments whose records are all consumed. When the
// active segment is consumed too, it is replaced by an empty segment named
// after the next offset, so the log never forgets where it goes on: a new
// file is created first and the old one removed after (a crash in between
// leaves two contiguous segments); when no file can be created (a disk so
// full that it refuses even an empty one), or the log is moved beyond its
// end, the segment's own file is renamed to the new name first and emptied
// after. A crash in between leaves consumed records under the new name:
// Open recognizes a last segment whose first record is valid but below the
// segment's base and empties it, so the next offset is the one the name
// says.
//
// # Durability
//
// Append encodes records into a shared buffer; one appender at a time (the
// leader) writes everything that has accumulated with one write and, under
// SyncAlways, one fdatasync — group commit — then wakes all appenders whose
// records were in that write. Append returns only when the configured
// durability holds: SyncAlways — the records were fdatasync'ed; SyncInterval —
// they were handed to the OS and a background fdatasync follows within the
// interval (a power failure can lose that interval, a process crash nothing);
// SyncNone — handed to the OS, synced only on seal and Close (unsafe on power
// failure). Readers see a record only once Append would return for it.
//
// Under SyncInterval and SyncNone readers may pass an offset on (a message
// id) before it is durable, and a power failure then loses it: the next
// records would take the lost offsets. WithOffsetReservation prevents that:
// the log persists a reservation ahead of every offset it publishes, and
// Open skips to it, behind a gap frame, when the log ends before it
// (SkippedAtOpen).
//
// A failed write (ENOSPC, EIO) is undone: the segment is truncated back to its
// last complete record, every append of the failed and the queued batches gets
// the error, and the log stays usable, so a later append succeeds once space
// is back. A failed fdatasync is different: the kernel may have dropped the
// dirty pages, so nothing written since the last good sync can be trusted; the
// log refuses all further appends (ErrBroken) until it is reopened, and
// recovery re-reads what really is on disk.
//
// # Recovery
//
// Open checks every segment. In the last segment, a bad final record — one
// that runs past the end of the file, fails its checksum, or is followed by
// nothing valid — is truncated, never returned. If it runs past the end of
// the file or reads as zeros in a sector, it is a torn write from a crash:
// logged and counted (Stats.TornTails). Otherwise (a wrong checksum or
// header, no zero sector) it was damaged after it was written whole, and
// may have been acknowledged: its bytes are first copied to DIR/quarantine/,
// and it is logged as an error and counted (Stats.DamagedTails). Any other
// bad record is
// corruption: Open fails with a *CorruptionError naming the file and byte
// position, and nothing is skipped silently. Check reports every problem
// without changing anything (it needs no lock). Repair salvages: after each
// damaged range it resynchronizes on the next 8-aligned frame whose header,
// checksum and offset are valid and whose successor confirms it, copies only
// the damaged bytes to DIR/quarantine/, and rewrites the damaged segment
// with every intact record before and after the damage at its original
// offset and a gap frame for the lost offsets. Intact segments are not
// touched; a missing segment becomes a gap; appends continue after the
// highest offset.
package seglog
