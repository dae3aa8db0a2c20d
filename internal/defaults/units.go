package defaults

import (
	"fmt"
	"strconv"
)

// HumanSize prints n bytes for people, to three significant digits at
// most: 384 MiB, 1.5 GiB, 12.3 KiB, 912 B. Unlike FormatSize it need not
// parse back, so it rounds.
func HumanSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult {
			v := float64(n) / float64(u.mult)
			prec := 1
			if v >= 100 || n%u.mult == 0 {
				prec = 0
			}
			return strconv.FormatFloat(v, 'f', prec, 64) + " " + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}

// RateString prints a link rate given in bytes per second in bits, as
// links are sold: 1Gbit/s, 40Mbit/s; 0 is "unlimited".
func RateString(bytesPerSec int64) string {
	if bytesPerSec == 0 {
		return "unlimited"
	}
	bits := float64(bytesPerSec) * 8
	switch {
	case bits >= 1e9:
		return fmt.Sprintf("%gGbit/s", bits/1e9)
	case bits >= 1e6:
		return fmt.Sprintf("%gMbit/s", bits/1e6)
	}
	return fmt.Sprintf("%gkbit/s", bits/1e3)
}
