// Package metrictest reads a Prometheus registry's values in tests, by the
// names an operator sees. It is for tests only.
package metrictest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value is the value of the counter or gauge named "name" or
// "name{label=value}" in g; the test fails when there is none.
func Value(tb testing.TB, g prometheus.Gatherer, name string) float64 {
	tb.Helper()
	base, label, _ := strings.Cut(strings.TrimSuffix(name, "}"), "{")
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != base {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				match = match || lp.GetName()+"="+lp.GetValue() == label
			}
			if match {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	tb.Fatalf("metric %s not found", name)
	return 0
}
