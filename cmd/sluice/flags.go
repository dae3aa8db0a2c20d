package main

import (
	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/defaults"
)

// byteSize is a flag value such as 256KiB, 4MiB, 100B or 1000.
type byteSize = cliflag.Size

// sizeList is a comma-separated list of sizes.
type sizeList = cliflag.SizeList

// parseByteSize reads a size as byteSize does.
func parseByteSize(s string) (int64, error) { return cliflag.ParseSize(s) }

// formatSize prints n bytes exactly, in the largest binary unit that
// divides it: 4MiB, 1536KiB, 1000B. Set parses every result back.
func formatSize(n int64) string { return defaults.FormatSize(n) }

// humanSize prints n bytes for people: 384 MiB, 1.5 GiB, 912 B.
func humanSize(n int64) string { return defaults.HumanSize(n) }
