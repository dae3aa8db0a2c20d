package metricsgen

import "math"

// rng is SplitMix64: tiny, fast, and fully specified here, so the output of
// a seed does not depend on math/rand's algorithms in a given Go release.
type rng struct{ s uint64 }

func newRNG(seed int64, stream uint64) rng {
	r := rng{s: uint64(seed) ^ stream*0xd1b54a32d192ed03}
	r.next()
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float returns a uniform number in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) * 0x1p-53 }

// intn returns a uniform integer in [0, n), 0 < n < 2^32.
func (r *rng) intn(n int) int { return int((r.next() >> 32) * uint64(n) >> 32) }

// between returns a uniform number in [lo, hi).
func (r *rng) between(lo, hi float64) float64 { return lo + (hi-lo)*r.float() }

// norm returns a standard normal deviate, quantised to 4096 equiprobable
// values (|z| <= 3.67): plenty for noise, and one table load per draw.
func (r *rng) norm() float64 { return normTable[r.next()>>52] }

// logn returns a log-normal number with the given median and shape sigma.
func (r *rng) logn(median, sigma float64) float64 { return median * math.Exp(sigma*r.norm()) }

// weighted returns an index drawn with the given relative weights.
func (r *rng) weighted(w []float64) int {
	var sum float64
	for _, x := range w {
		sum += x
	}
	u := r.float() * sum
	for i, x := range w {
		if u < x {
			return i
		}
		u -= x
	}
	return len(w) - 1
}

var normTable [4096]float64

func init() {
	for i := range normTable {
		normTable[i] = probit((float64(i) + 0.5) / float64(len(normTable)))
	}
}

// probit is the standard normal quantile function.
func probit(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// phi is the standard normal distribution function.
func phi(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
