package delivery

import "time"

// rttEstimator computes the retransmission timeout the way TCP does
// (RFC 6298, after Jacobson and Karels). Choosing which acks may be sampled
// (Karn's algorithm) is the caller's job.
type rttEstimator struct {
	minRTO, maxRTO time.Duration

	// srtt and rttvar are the smoothed round-trip time and its mean
	// deviation. Both are zero until the first sample.
	srtt, rttvar time.Duration
	sampled      bool

	// rto is the current timeout, back-off included.
	// Invariant: minRTO <= rto <= maxRTO.
	rto time.Duration

	// backedOffAt is the Now of the last back-off, valid if backedOff.
	// Every message in flight has its own timer, so one stall fires a whole
	// window of them; backing off once per fire would send the RTO to
	// maxRTO on the first stall. A timeout backs off only if its message was
	// sent at or after the last back-off, i.e. was timed with the current
	// RTO: one doubling per round, as with TCP's single timer.
	backedOffAt int64
	backedOff   bool
}

func newRTTEstimator(initial, minRTO, maxRTO time.Duration) rttEstimator {
	return rttEstimator{minRTO: minRTO, maxRTO: maxRTO, rto: initial}
}

// sample feeds one round-trip measurement and clears any back-off.
func (e *rttEstimator) sample(r time.Duration) {
	if r < 0 {
		r = 0
	}
	if !e.sampled {
		e.srtt, e.rttvar, e.sampled = r, r/2, true
	} else {
		// RTTVAR first: it uses the SRTT from before this sample.
		d := e.srtt - r
		if d < 0 {
			d = -d
		}
		e.rttvar += (d - e.rttvar) / 4 // β = 1/4
		e.srtt += (r - e.srtt) / 8     // α = 1/8
	}
	e.rto = e.clamp(e.srtt + 4*e.rttvar)
}

// backoff doubles the RTO after the timeout of a message sent at sentAt.
func (e *rttEstimator) backoff(sentAt, now int64) {
	if e.backedOff && sentAt < e.backedOffAt {
		return
	}
	e.backedOff, e.backedOffAt = true, now
	if e.rto > e.maxRTO/2 {
		e.rto = e.maxRTO
		return
	}
	e.rto = e.clamp(2 * e.rto)
}

func (e *rttEstimator) clamp(d time.Duration) time.Duration {
	return min(max(d, e.minRTO), e.maxRTO)
}
