package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag value such as 256KiB, 4MiB, 100B or 1000.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

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
		return 0, fmt.Errorf("bad size %q: want e.g. 100B, 16KiB, 4MiB", s)
	}
	return n * mult, nil
}

// sizeList is a comma-separated list of sizes.
type sizeList []int

func (l *sizeList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
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
