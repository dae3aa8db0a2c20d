// Package deadletter is the agent's dead-letter log: messages a sink
// refused for good (too large for its store, a body it cannot read),
// copied out of the spool when the spool needs the room they hold. A
// parked message holds the acknowledged watermark, so every spool segment
// from it on stays on disk however much of it the sink acknowledged; left
// there, one such message fills the spool and ingest answers 507 for
// good. Set aside, it is kept (never dropped) for an operator to read
// with `sluice dead-letter list` and send again once the sink takes it.
//
// The log is a seglog in SPOOL/dead-letter, one record per message:
//
//	0  uint8   version (1)
//	1  uint64  the message's id in the spool (little endian)
//	9  int64   when it was set aside, Unix nanoseconds
//	17 uint8   length of the refusal's code, then the code
//	.. uint16  length of the refusal's detail, then the detail
//	.. bytes   the spool record as it was spooled (internal/agent/spool)
package deadletter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluicehq/sluice/seglog"
)

// Dir is the dead-letter log's directory inside the spool's.
const Dir = "dead-letter"

const version = 1

// MaxDetail bounds the detail kept with a letter: a sink's message, not a
// place for its whole log.
const MaxDetail = 1024

// ErrBadLetter is returned (wrapped) by Decode for bytes that are no
// dead letter.
var ErrBadLetter = errors.New("deadletter: malformed record")

// Letter is one message set aside.
type Letter struct {
	ID     uint64    // the message's id in the spool (its delivery id)
	At     time.Time // when it was set aside
	Code   string    // the refusal's code (ERROR_CODE_OVERSIZE, local_corrupt, ...)
	Detail string    // the refusal's detail, at most MaxDetail bytes
	// Record is the spool record as it was spooled (spool.Decode reads
	// it): codec, marks and the body as it went on the wire.
	Record []byte
}

// Append appends l's encoding to dst. A code longer than 255 bytes or a
// detail longer than MaxDetail is cut.
func Append(dst []byte, l Letter) []byte {
	code, detail := l.Code, l.Detail
	if len(code) > 255 {
		code = code[:255]
	}
	if len(detail) > MaxDetail {
		detail = detail[:MaxDetail]
	}
	dst = append(dst, version)
	dst = binary.LittleEndian.AppendUint64(dst, l.ID)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(l.At.UnixNano()))
	dst = append(dst, byte(len(code)))
	dst = append(dst, code...)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(detail)))
	dst = append(dst, detail...)
	return append(dst, l.Record...)
}

// Decode parses one record of the log. Record aliases b.
func Decode(b []byte) (Letter, error) {
	const fixed = 1 + 8 + 8 + 1
	if len(b) < fixed {
		return Letter{}, fmt.Errorf("%w: %d bytes", ErrBadLetter, len(b))
	}
	if b[0] != version {
		return Letter{}, fmt.Errorf("%w: version %d", ErrBadLetter, b[0])
	}
	l := Letter{ID: binary.LittleEndian.Uint64(b[1:]), At: time.Unix(0, int64(binary.LittleEndian.Uint64(b[9:])))}
	p := fixed
	n := int(b[p-1])
	if p+n+2 > len(b) {
		return Letter{}, fmt.Errorf("%w: code of %d bytes cut short", ErrBadLetter, n)
	}
	l.Code = string(b[p : p+n])
	p += n
	n = int(binary.LittleEndian.Uint16(b[p:]))
	p += 2
	if n > MaxDetail || p+n > len(b) {
		return Letter{}, fmt.Errorf("%w: detail of %d bytes", ErrBadLetter, n)
	}
	l.Detail = string(b[p : p+n])
	l.Record = b[p+n:]
	return l, nil
}

// ReadUnique is Read with each message once: only its first letter is
// passed to fn. The agent no longer copies a message its log already
// holds (spool.SetAside), but a log written by an earlier release may
// hold a message twice: a crash after its letter was fsynced and before
// the watermark past it was persisted set it aside again after the
// restart (the same id, the same message).
func ReadUnique(dir string, fn func(Letter) error) error {
	seen := map[uint64]bool{}
	return Read(dir, func(l Letter) error {
		if seen[l.ID] {
			return nil
		}
		seen[l.ID] = true
		return fn(l)
	})
}

// Read calls fn with every letter of the dead-letter log in dir, oldest
// first. It only reads, so it is safe while the agent runs (it may miss a
// letter being written); a letter that does not decode is an error, after
// those before it. A dir that does not exist holds no letters.
func Read(dir string, fn func(Letter) error) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var ferr error
	rep, err := seglog.Check(dir, seglog.WithCheckVisitor(func(offset uint64, body []byte) {
		if ferr != nil {
			return
		}
		l, err := Decode(body)
		if err != nil {
			ferr = fmt.Errorf("dead letter %d: %w", offset, err)
			return
		}
		ferr = fn(l)
	}))
	if err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	for _, p := range rep.Problems {
		if !p.Torn {
			return fmt.Errorf("dead-letter log %s: damaged at %s byte %d (sluice log check --repair %s keeps the rest)", dir, p.File, p.Pos, dir)
		}
	}
	return nil
}

// DamagedPrefix names, after Dir, the logs the agent moved aside when it
// found its dead-letter log damaged (spool.openDeadLetters):
// SPOOL/dead-letter.damaged-UNIXNANO.
const DamagedPrefix = Dir + ".damaged-"

// Damaged lists the damaged dead-letter logs moved aside in spoolDir,
// oldest first.
func Damaged(spoolDir string) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(spoolDir, DamagedPrefix+"*"))
	slices.Sort(dirs) // the same number of digits: by time
	return dirs, err
}

// ReadSpool calls fn with each message's first letter in the spool in
// spoolDir: the intact letters of the damaged logs moved aside, oldest
// first, then the log's. A message set aside again after its log was
// moved aside has a letter in both; the first is passed. The letters of
// a damaged log are those seglog.Check finds whole, before and after the
// damage: the agent moved it aside so that none is lost, and `sluice
// dead-letter list` shows them with the rest. It returns the damaged
// logs it read; damage in the log itself is an error, as in Read.
func ReadSpool(spoolDir string, fn func(Letter) error) (damaged []string, err error) {
	damaged, err = Damaged(spoolDir)
	if err != nil {
		return nil, err
	}
	seen := map[uint64]bool{}
	first := func(l Letter) error {
		if seen[l.ID] {
			return nil
		}
		seen[l.ID] = true
		return fn(l)
	}
	for _, d := range damaged {
		if err := readIntact(d, first); err != nil {
			return damaged, err
		}
	}
	return damaged, Read(filepath.Join(spoolDir, Dir), first)
}

// readIntact calls fn with every letter of dir that is whole, whatever
// damage lies between them; a record that is whole but no letter is
// skipped too.
func readIntact(dir string, fn func(Letter) error) error {
	var ferr error
	_, err := seglog.Check(dir, seglog.WithCheckVisitor(func(_ uint64, body []byte) {
		if ferr != nil {
			return
		}
		if l, err := Decode(body); err == nil {
			ferr = fn(l)
		}
	}))
	if ferr != nil {
		return ferr
	}
	return err
}
