package sink

func setLimitsForHeap(c *Config, n int) { c.MaxConnsPerPeer, c.MaxConsumers = n+10, n+10 }
