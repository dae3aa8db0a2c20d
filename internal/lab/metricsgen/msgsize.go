package metricsgen

import "math"

// sizeDist is a log-normal distribution truncated to [lo, hi]: X = exp(mu +
// sigma*Z) conditioned on lo <= X <= hi. New solves mu so that the truncated
// mean equals the configured mean; draws use the inverse distribution
// function, one uniform number per draw.
type sizeDist struct {
	mu, sigma float64
	lo, hi    float64 // bounds in bytes
	pLo, pHi  float64 // Φ((ln lo − mu)/sigma), Φ((ln hi − mu)/sigma)
}

func newSizeDist(mean, lo, hi, sigma float64) sizeDist {
	// The truncated mean increases with mu; bisect.
	a, b := math.Log(lo)-8*sigma, math.Log(hi)+8*sigma
	for range 200 {
		m := (a + b) / 2
		if truncMean(m, sigma, lo, hi) < mean {
			a = m
		} else {
			b = m
		}
	}
	d := sizeDist{mu: (a + b) / 2, sigma: sigma, lo: lo, hi: hi}
	d.pLo = phi((math.Log(lo) - d.mu) / sigma)
	d.pHi = phi((math.Log(hi) - d.mu) / sigma)
	return d
}

// truncMean is E[X | lo <= X <= hi] for X = exp(mu + sigma*Z).
func truncMean(mu, sigma, lo, hi float64) float64 {
	al, be := (math.Log(lo)-mu)/sigma, (math.Log(hi)-mu)/sigma
	den := phi(be) - phi(al)
	if den <= 0 {
		if be <= 0 {
			return lo
		}
		return hi
	}
	return math.Exp(mu+sigma*sigma/2) * (phi(be-sigma) - phi(al-sigma)) / den
}

// quantile returns the size at probability p of the truncated distribution.
func (d *sizeDist) quantile(p float64) float64 {
	u := d.pLo + (d.pHi-d.pLo)*p
	x := math.Exp(d.mu + d.sigma*probit(u))
	return min(max(x, d.lo), d.hi)
}

func (d *sizeDist) draw(r *rng) int { return int(d.quantile(r.float()) + 0.5) }
