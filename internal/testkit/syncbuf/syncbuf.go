// Package syncbuf has Buffer, a bytes.Buffer that one goroutine writes
// (a child process's output, a logger) while others read it: the peer
// launcher, the benchmarks' child processes and tests watch logs grow.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write and reads. The zero value is empty
// and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns a copy of what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines counts the complete lines written so far.
func (b *Buffer) Lines() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Count(b.b.Bytes(), []byte{'\n'})
}
