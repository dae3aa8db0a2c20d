// Package progress draws a file transfer's progress on one terminal
// line (`sluice xfer send`): a bar, the share done, bytes, rate and ETA.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
)

// NewBar is a Bar drawing on w, its clock started now.
func NewBar(w io.Writer) *Bar { return &Bar{w: w, start: time.Now()} }

// IsTerminal tells whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Bar draws "[=====>    ]  42% 1.2 GiB/2.9 GiB  512 MiB/s  ETA 4s"
// on one terminal line, at most 10 times a second.
type Bar struct {
	w           io.Writer
	start, last time.Time
	base        int64 // bytes the server had already: not counted in the rate
	seen        bool
}

// Update draws done of total bytes (the last update always).
func (b *Bar) Update(done, total int64) {
	now := time.Now()
	if !b.seen {
		b.seen, b.base, b.start = true, done, now
	}
	if done < b.base {
		b.base, b.start = done, now // restarted from a lower offset
	}
	if now.Sub(b.last) < 100*time.Millisecond && done < total {
		return
	}
	b.last = now
	const width = 30
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	fill := int(frac * width)
	bar := strings.Repeat("=", fill)
	if fill < width {
		bar += ">" + strings.Repeat(" ", width-fill-1)
	}
	el := now.Sub(b.start).Seconds()
	rate, eta := 0.0, "?"
	if el > 0 && done > b.base {
		rate = float64(done-b.base) / el
		eta = (time.Duration(float64(total-done)/rate) * time.Second / time.Second).Round(time.Second).String()
	}
	fmt.Fprintf(b.w, "\r[%s] %3.0f%% %s/%s  %s/s  ETA %s   ", bar, 100*frac, defaults.HumanSize(done), defaults.HumanSize(total), defaults.HumanSize(int64(rate)), eta)
}

// Finish ends the line, if one was drawn.
func (b *Bar) Finish() {
	if b.seen {
		fmt.Fprintln(b.w)
	}
}
