// Package store is what the sink's sessions and its storage backends
// share: a validated Message on its way to durable storage, the Acks box
// through which a storage writer tells a session which of its messages are
// durable, and the Store interface a backend (the embedded seglog store, a
// Kafka topic) implements.
//
// Dependencies point one way: a session owns its Acks and hands Messages
// that carry it to the writer; the writer and the backends know nothing
// of sessions, connections or transports.
package store

import (
	"context"
	"errors"
	"sync"

	"github.com/sluicehq/sluice/internal/codec"
)

// Message is one validated message to store.
type Message struct {
	Agent   string
	AgentB  []byte // Agent as bytes, shared by a session's messages
	ID      uint64 // the agent's delivery id
	Codec   codec.Kind
	DictID  uint32
	Records uint32
	// Body is the payload as the agent sent it (compressed, if it was):
	// stored as it is. The Message owns it until the writer reports it.
	Body []byte
	// Acks receives the outcome; owned by the session that sent it.
	Acks *Acks

	// DropErr is set by a Store when the message can never be stored.
	DropErr error
}

// Store is where the storage writer puts messages. The writer keeps the
// group commit, the dedup decisions and the acks; a Store only makes a
// group durable and keeps what the dedup index needs to survive restarts.
type Store interface {
	// Append stores msgs durably and returns the bytes written, once all
	// of them are durable. Only the storage writer calls it. On error none
	// of msgs counts as stored (some may be, and are written again when
	// their agents resend them). A message that can never be stored has
	// its DropErr set and is left out; the others are stored.
	Append(msgs []*Message) (int64, error)
	// CheckpointName is the dedup checkpoint's file name in the data
	// directory.
	CheckpointName() string
	// AppendCheckpoint encodes the dedup checkpoint. The caller holds the
	// dedup index's lock.
	AppendCheckpoint(dst []byte) []byte
	// TakeTailBytes returns the bytes a background reader of the store
	// consumed since the last call: progress a checkpoint would save.
	TakeTailBytes() int64
	// Gate returns a channel that is closed once the messages of a
	// session whose Hello arrived just now may be handed to the writer,
	// or nil if they may at once. It stays open until ctx ends if that
	// never happens.
	Gate(ctx context.Context) <-chan struct{}
	// Abort makes an Append in progress return soon, with an error: the
	// last resort of a shutdown.
	Abort()
	// Close releases the store once the writer has stopped.
	Close() error
}

// KafkaRecordsTaker is implemented by a Store that may take messages
// whose Codec is codec.KafkaZstd (a zstd frame of a Kafka records
// section, kafkarec.AppendRecords') with their bodies as the agents sent
// them: the Kafka store writing its own record batches puts such a body,
// untouched, behind a record batch header. A Store that does not
// implement it, or says false, gets such messages converted by the
// session into a zstd internal/batch batch, as if the agent had sent that.
type KafkaRecordsTaker interface {
	TakesKafkaRecords() bool
}

// TakesKafkaRecords reports whether s takes codec.KafkaZstd bodies as they
// are (see KafkaRecordsTaker).
func TakesKafkaRecords(s Store) bool {
	t, ok := s.(KafkaRecordsTaker)
	return ok && t.TakesKafkaRecords()
}

// Reader is a store read back by position, as a consumer's read session
// needs it: bounds, an iterator, a wait for what is not stored yet, and
// consumer groups' committed positions. The embedded store implements it
// (seglogstore); the Kafka store, whose positions are per partition, is
// read through its own client (see the sink's kafkaread.go).
type Reader interface {
	// FirstOffset is the first position still stored, NextOffset the one
	// the next message gets.
	FirstOffset() uint64
	NextOffset() uint64
	// Wait returns a channel closed once a message at offset is stored or
	// the store closes.
	Wait(offset uint64) <-chan struct{}
	// NewIterator reads from offset on, holding about chunk bytes at a
	// time. Its Err wraps ErrTruncated or ErrClosed when those are why it
	// stopped.
	NewIterator(from uint64, chunk int) Iterator
	// Committed returns group's committed position; ok is false if it has
	// none. Commit stores one durably.
	Committed(group string) (pos uint64, ok bool, err error)
	Commit(group string, pos uint64) error
}

// Iterator reads stored records in order. Value is valid until the next
// call to Next.
type Iterator interface {
	Next() bool
	Offset() uint64
	Value() []byte
	Err() error
}

// Errors of a Reader's iterators.
var (
	// ErrTruncated: the position was removed from the store meanwhile.
	ErrTruncated = errors.New("store: position no longer stored")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
)

// Acks collects what the storage writer reports to one session: the ids
// stored (duplicates included) and the first failure. The writer never
// blocks on it, so a slow session cannot hold the writer up. Safe for
// concurrent use.
type Acks struct {
	mu    sync.Mutex
	ids   []uint64
	spare []uint64
	err   error
	ch    chan struct{}
	// Counted for the session's agent (the status page's per-agent
	// rows): records newly stored and messages that were duplicates.
	records, duplicates uint64
}

// NewAcks returns an empty Acks.
func NewAcks() *Acks { return &Acks{ch: make(chan struct{}, 1)} }

// Stored records that id is durable: newly appended with records in it,
// or a duplicate of a message stored before. The writer calls Signal
// after a group of them.
func (a *Acks) Stored(id uint64, records int, duplicate bool) {
	a.mu.Lock()
	a.ids = append(a.ids, id)
	if duplicate {
		a.duplicates++
	} else {
		a.records += uint64(records)
	}
	a.mu.Unlock()
}

// Counts returns the records stored and the duplicate messages reported
// so far.
func (a *Acks) Counts() (records, duplicates uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.records, a.duplicates
}

// Fail records that a message could not be stored: the session ends so
// that its agent resends. The first failure is kept.
func (a *Acks) Fail(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
	a.Signal()
}

// Signal wakes the session (C); it never blocks.
func (a *Acks) Signal() {
	select {
	case a.ch <- struct{}{}:
	default:
	}
}

// C is signalled after the writer reported something.
func (a *Acks) C() <-chan struct{} { return a.ch }

// Take returns the ids reported since the last Take and the failure, if
// any. The session hands ids back with Recycle once it has read them.
func (a *Acks) Take() ([]uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := a.ids
	a.ids, a.spare = a.spare[:0], nil
	return ids, a.err
}

// Recycle gives Take's slice back for reuse.
func (a *Acks) Recycle(ids []uint64) {
	a.mu.Lock()
	if a.spare == nil {
		a.spare = ids[:0]
	}
	a.mu.Unlock()
}
