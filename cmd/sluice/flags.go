package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/flagfile"
)

// byteSize is a flag value such as 256KiB, 4MiB, 100B or 1000.
type byteSize int64

// String prints the size in the largest binary unit that holds it exactly
// (1GiB, 256KiB, 100B), so defaults in -h read as sizes and parse back.
func (b *byteSize) String() string { return formatSize(int64(*b)) }

// formatSize prints n bytes exactly, in the largest binary unit that
// divides it: 4MiB, 1536KiB, 1000B. Set parses every result back.
func formatSize(n int64) string { return defaults.FormatSize(n) }

// humanSize prints n bytes for people: 384 MiB, 1.5 GiB, 912 B.
func humanSize(n int64) string { return defaults.HumanSize(n) }

func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"kB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, &flagfile.ValueError{Value: s, Want: "want a size such as 100B, 16KiB or 4MiB"}
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// sizeList is a comma-separated list of sizes.
type sizeList []int

func (l *sizeList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = formatSize(int64(n))
	}
	return strings.Join(parts, ",")
}

func (l *sizeList) Set(s string) error {
	*l = nil
	for _, p := range strings.Split(s, ",") {
		n, err := parseByteSize(p)
		if err != nil {
			return err
		}
		*l = append(*l, int(n))
	}
	return nil
}
