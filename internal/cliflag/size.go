package cliflag

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/defaults"
)

// Size is a flag value such as 256KiB, 4MiB, 100B or 1000.
type Size int64

// String prints the size in the largest binary unit that holds it exactly
// (1GiB, 256KiB, 100B), so defaults in -h read as sizes and parse back.
func (b *Size) String() string { return defaults.FormatSize(int64(*b)) }

func (b *Size) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*b = Size(n)
	return nil
}

// ParseSize reads a size: a count of bytes with an optional unit, binary
// (KiB, MiB, GiB) or decimal (KB, MB, GB), or B.
func ParseSize(s string) (int64, error) {
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
		return 0, &ValueError{Value: s, Want: "want a size such as 100B, 16KiB or 4MiB"}
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// ParseSizeOrShare reads a size (ParseSize) or a share of whole such as
// 50% (more than 0 % and at most 100 %; at least one byte), in bytes.
func ParseSizeOrShare(s string, whole int64) (int64, error) {
	pct, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	if !ok {
		return ParseSize(s)
	}
	p, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
	if err != nil || !(p > 0 && p <= 100) {
		return 0, &ValueError{Value: s, Want: "want a size, or a share above 0% and up to 100%"}
	}
	return max(int64(float64(whole)*p/100), 1), nil
}

// SizeList is a comma-separated list of sizes.
type SizeList []int

func (l *SizeList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = defaults.FormatSize(int64(n))
	}
	return strings.Join(parts, ",")
}

func (l *SizeList) Set(s string) error {
	*l = nil
	for _, p := range strings.Split(s, ",") {
		n, err := ParseSize(p)
		if err != nil {
			return err
		}
		*l = append(*l, int(n))
	}
	return nil
}
