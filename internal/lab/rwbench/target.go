package rwbench

import (
	"bytes"
	"net"
	"net/http"
	"sync"

	"github.com/sluicehq/sluice/internal/lab/metricsgen"
)

// fleetPage serves a generated scrape page: each request is one scrape
// round of a metricsgen fleet (every series once, values moving as the
// generator models them), so that Prometheus has a realistic volume to
// remote-write besides its own few hundred series.
type fleetPage struct {
	mu     sync.Mutex
	g      *metricsgen.Generator
	series int
	page   []byte
	line   []byte
}

func newFleetPage(hosts int, seed int64) (*fleetPage, error) {
	g, err := metricsgen.New(metricsgen.Config{Seed: seed, Hosts: hosts})
	if err != nil {
		return nil, err
	}
	return &fleetPage{g: g, series: g.Stats().Series}, nil
}

func (f *fleetPage) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.page = f.page[:0]
	for range f.series {
		f.line = f.g.AppendRecord(f.line[:0])
		// The generator stamps simulated time; Prometheus must stamp the
		// scrape, or its TSDB refuses the samples as too old.
		if i := bytes.LastIndexByte(f.line, ' '); i > 0 {
			f.line = f.line[:i]
		}
		f.page = append(append(f.page, f.line...), '\n')
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write(f.page)
}

// serveFleet serves page on a loopback port until the returned stop.
func serveFleet(page *fleetPage) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", page)
	srv := &http.Server{Handler: mux}
	go srv.Serve(lis)
	return lis.Addr().String(), func() { srv.Close() }, nil
}
