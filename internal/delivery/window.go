package delivery

import (
	"math"
	"time"
)

// Adaptive window ("auto" mode: SenderConfig.MaxInFlightMsgs and
// MaxInFlightBytes both zero).
//
// The window is sized to the bandwidth-delay product of the whole path
// (network, sink queue and storage group commit), the way BBR sizes its
// congestion window:
//
//	bytes = max(floor, gain × maxRate × minRTT)
//	msgs  = max(4,     gain × maxMsgRate × minRTT)
//
// maxRate is the largest delivery rate sampled over the last ten smoothed
// RTTs. A sample is taken per Acked event, on the newest id acked that was
// sent only once: (bytes acked between that id's send and now) / (now − its
// send time), the definition BBR uses. The gain of 2 lets a window that is
// too small grow: a full window delivered in one RTT yields a window twice
// as big, so the window doubles every round trip until the path, not the
// window, limits the rate. Below the first sample the window is the floor.
//
// minRTT is the smallest RTT seen in the last 10 s. A window of twice the
// BDP keeps about one BDP queued somewhere on the path, and that queue
// inflates every RTT sample; once the queue is standing, the true minimum
// would age out of the filter and the window would ratchet upwards. So,
// like BBR's ProbeRTT, when minRTT is 10 s old the window drops to the floor
// for 200 ms plus one SRTT, the queue drains, and a fresh minimum is taken.
// That is 200 ms + SRTT of every 10 s at the floor: 2% of the time on a
// short path, 5% at 300 ms.
//
// The window never raises what credits allow: a send must fit both (see
// Sender.fits). A stream that is app-limited delivers less than the path
// could; as in BBR, a sample taken while the Sender had run out of messages
// only counts if it raises the estimate, so a lull in the application
// does not shrink the window. The rate filter spans ten smoothed RTTs but at
// least one second: on loopback ten RTTs are a few milliseconds, and a
// scheduling hiccup that short must not cost the estimate.
//
// The byte floor is four typical messages (an EWMA of message sizes), at
// least 64 KiB, so that large messages still keep several in flight while
// the estimate is young.
//
// Start-up, as in BBR: until the first sample the window is 2 MiB / 128
// messages (TCP below still does congestion control, and the sink's
// credits bound its queue, so this only skips the first doublings); then
// the gain is 2/ln 2 ≈ 2.89, which grows the window by that factor per
// round trip, until the rate has not grown by 25% for three rounds: the
// pipe is full and the gain drops to 2. On a 150 ms, 1 Gbit/s path that
// reaches the 18.75 MB bandwidth-delay product in about 0.5 s instead of
// 1.2 s.
const (
	autoInitBytes      = 2 << 20
	autoInitMsgs       = 128
	startupGain        = 2.885 // 2/ln 2
	fullPipeGrowth     = 1.25
	fullPipeRounds     = 3
	autoMinBytes       = 64 << 10
	autoMinMsgs        = 4
	autoGain           = 2
	rateFilterRTTs     = 10
	minRTTLifetime     = int64(10 * time.Second)
	probeRTTFloorTime  = int64(200 * time.Millisecond)
	minRateFilterWidth = int64(time.Second)
)

// window is the Sender's own limit on what is in flight.
type window struct {
	auto bool

	// msgs and bytes are the current limits; zero means unlimited (fixed
	// mode only: in auto mode both are at least the floor).
	msgs  int
	bytes int64

	byteRate maxFilter // bytes per nanosecond
	msgRate  maxFilter // messages per nanosecond

	// minRTT was sampled at minRTTAt; valid once hasRTT.
	minRTT   int64
	minRTTAt int64
	hasRTT   bool

	// While probing (until probeEnd) the window is held at the floor.
	probing  bool
	probeEnd int64

	// msgSize is an EWMA of message sizes (gain 1/8), for the byte floor.
	msgSize int64

	// Start-up: until the pipe is full (the rate stopped growing by 25%
	// over three rounds of one minRTT each) the gain is startupGain.
	filled     bool
	roundStart int64
	fullRate   float64
	flatRounds int
}

// observeSize feeds the size of a newly spooled message.
func (w *window) observeSize(n int64) {
	if w.msgSize == 0 {
		w.msgSize = n
	} else {
		w.msgSize += (n - w.msgSize) / 8
	}
}

// floorBytes is the least the auto window allows in flight.
func (w *window) floorBytes() int64 {
	return max(autoMinBytes, autoMinMsgs*w.msgSize)
}

func newWindow(msgs int, bytes int64) window {
	if msgs == 0 && bytes == 0 {
		return window{auto: true, msgs: autoInitMsgs, bytes: autoInitBytes}
	}
	return window{msgs: msgs, bytes: bytes}
}

// tick ends a ProbeRTT phase whose time is up.
func (w *window) tick(now int64) {
	if w.probing && now >= w.probeEnd {
		w.probing = false
		// Restart the minRTT lifetime even if no lower sample came, so
		// that the next probe is a full lifetime away.
		w.minRTTAt = now
		w.resize()
	}
}

// onSample takes one delivery sample: over interval nanoseconds ending at
// now, ackedBytes bytes in ackedMsgs messages were delivered; rtt is the
// round-trip time of the sampled message, srtt the smoothed one.
// appLimited marks a sample taken while the application, not the path,
// limited delivery; it may raise the rate estimate but never lower it.
func (w *window) onSample(now int64, rtt, srtt time.Duration, interval, ackedBytes, ackedMsgs int64, appLimited bool) {
	if !w.auto {
		return
	}
	r := int64(rtt)
	expired := w.hasRTT && now-w.minRTTAt > minRTTLifetime
	// Strictly lower, as in BBR: an equal sample does not renew the
	// minimum's lifetime, so a path whose queue never drains still probes.
	if !w.hasRTT || r < w.minRTT || expired {
		w.minRTT, w.minRTTAt, w.hasRTT = r, now, true
	}
	if expired && !w.probing {
		w.probing = true
		w.probeEnd = now + probeRTTFloorTime + int64(srtt)
	}
	if interval > 0 {
		width := max(rateFilterRTTs*int64(srtt), minRateFilterWidth)
		byteRate := float64(ackedBytes) / float64(interval)
		msgRate := float64(ackedMsgs) / float64(interval)
		if !appLimited || byteRate > w.byteRate.best() {
			w.byteRate.update(width, now, byteRate)
		}
		if !appLimited || msgRate > w.msgRate.best() {
			w.msgRate.update(width, now, msgRate)
		}
	}
	if !w.filled && now-w.roundStart >= w.minRTT {
		// A round trip has passed: has the rate grown enough?
		w.roundStart = now
		if best := w.byteRate.best(); best >= w.fullRate*fullPipeGrowth {
			w.fullRate, w.flatRounds = best, 0
		} else if !appLimited {
			w.flatRounds++
			w.filled = w.flatRounds >= fullPipeRounds
		}
	}
	w.resize()
}

func (w *window) resize() {
	if !w.auto {
		return
	}
	if !w.hasRTT {
		w.msgs, w.bytes = autoInitMsgs, max(autoInitBytes, w.floorBytes())
		return
	}
	w.msgs, w.bytes = autoMinMsgs, w.floorBytes()
	if w.probing {
		return
	}
	gain := float64(autoGain)
	if !w.filled {
		gain = startupGain
	}
	rtt := float64(w.minRTT)
	w.bytes = max(w.bytes, saturate(gain*w.byteRate.best()*rtt))
	w.msgs = int(max(int64(w.msgs), saturate(math.Ceil(gain*w.msgRate.best()*rtt))))
}

// saturate converts a non-negative float to int64, capping where it would
// overflow. Windows that large are meaningless anyway; credits bound them.
func saturate(f float64) int64 {
	if f >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int64(f)
}

// maxFilter is a windowed running maximum: the largest sample of the last
// width nanoseconds, in O(1) time and space. It is Kathleen Nichols'
// algorithm as in Linux lib/minmax.c: keep the best, second best and third
// best samples from successive sub-windows, so that when the best ages out
// the second is already the best of what remains.
type maxFilter struct {
	s   [3]filterSample
	set bool
}

type filterSample struct {
	t int64
	v float64
}

func (f *maxFilter) best() float64 { return f.s[0].v }

func (f *maxFilter) update(width, t int64, v float64) {
	n := filterSample{t: t, v: v}
	if !f.set || v >= f.s[0].v || t-f.s[2].t > width {
		// A new maximum, or nothing left in the window: start over.
		f.s = [3]filterSample{n, n, n}
		f.set = true
		return
	}
	if v >= f.s[1].v {
		f.s[1], f.s[2] = n, n
	} else if v >= f.s[2].v {
		f.s[2] = n
	}
	dt := t - f.s[0].t
	switch {
	case dt > width:
		// The best aged out: promote, maybe twice, since the second best
		// may be out of the window as well (the third is not, see above).
		f.s[0], f.s[1], f.s[2] = f.s[1], f.s[2], n
		if t-f.s[0].t > width {
			f.s[0], f.s[1], f.s[2] = f.s[1], f.s[2], n
		}
	case f.s[1].t == f.s[0].t && dt > width/4:
		// A quarter of the window without a new best: take a second best
		// from the second quarter.
		f.s[1], f.s[2] = n, n
	case f.s[2].t == f.s[1].t && dt > width/2:
		// Half the window: take a third best from the second half.
		f.s[2] = n
	}
}
