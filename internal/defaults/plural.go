package defaults

import "fmt"

// Integer is any integer type Plural counts.
type Integer interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64
}

// Plural says n of a noun, as all of sluice's output does: "1 segment",
// "2 segments", "0 problems"; the plural is noun+"s" unless given.
func Plural[N Integer](n N, noun string, nouns ...string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	if len(nouns) > 0 {
		return fmt.Sprintf("%d %s", n, nouns[0])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
