package sink

import "github.com/sluicehq/sluice/internal/store"

// fileName is store.FileName: a name safe as one path element.
func fileName(s string) string { return store.FileName(s) }

// mkdirDurable creates dir and any missing parents durably (see
// store.MkdirDurable).
func mkdirDurable(dir string) error { return store.MkdirDurable(dir) }
