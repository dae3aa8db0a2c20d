package logutil

import "time"

// Every says when a line logged on a repeated event (a refusal, a
// rejection) is due again: at most once a period. A handler logs the
// first event at once and then stays quiet while the event repeats, which
// its counter shows. The zero value is due at once. Not safe for
// concurrent use: its owner's lock guards it, as it guards the state the
// event changed.
type Every struct {
	last time.Time
}

// Due reports whether the line is due at now, and if so notes it logged.
func (e *Every) Due(now time.Time, period time.Duration) bool {
	if !e.last.IsZero() && now.Sub(e.last) < period {
		return false
	}
	e.last = now
	return true
}

// EveryKey is Every for each key (a peer's address) of at most max keys
// at once: the keys logged within the last period are remembered, older
// ones forgotten when room is needed. With max keys logged within one
// period the line of a new key is not due until one ages out (the event
// is still counted by its caller), so that many peers, or one peer with
// many addresses, cannot grow the memory without bound. The zero value
// holds DefaultEveryKeys keys. Not safe for concurrent use.
type EveryKey struct {
	Max  int
	last map[string]time.Time
}

// DefaultEveryKeys is EveryKey's bound when Max is 0.
const DefaultEveryKeys = 1024

// Due reports whether the line about key is due at now, and if so notes
// it logged.
func (e *EveryKey) Due(key string, now time.Time, period time.Duration) bool {
	if at, ok := e.last[key]; ok && now.Sub(at) < period {
		return false
	}
	max := e.Max
	if max <= 0 {
		max = DefaultEveryKeys
	}
	if e.last == nil {
		e.last = make(map[string]time.Time)
	}
	if _, ok := e.last[key]; !ok && len(e.last) >= max {
		for k, at := range e.last {
			if now.Sub(at) >= period {
				delete(e.last, k)
			}
		}
		if len(e.last) >= max {
			return false
		}
	}
	e.last[key] = now
	return true
}

// Keys is how many keys are remembered.
func (e *EveryKey) Keys() int { return len(e.last) }
