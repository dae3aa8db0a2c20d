// Package chart draws the benchmark charts of `sluice bench` as plain SVG
// (no dependency, diffable in git): latency and throughput of the
// request-response olympics, upload MB/s by chunk size, WAN goodput by
// mode. Each function takes finished results and only draws.
package chart
