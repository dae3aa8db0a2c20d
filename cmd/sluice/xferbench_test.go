package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/lab/uploadbench"
)

// A tiny sweep runs every transport end to end and writes JSON and SVG.
func TestXferBenchUploadSmall(t *testing.T) {
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	var out, errb bytes.Buffer
	err := runBenchUpload([]string{"--size", "300KiB", "--chunks", "16KiB,64KiB", "--dir", dir, "--json", js, "--svg", svg}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var rep struct {
		Results []uploadbench.Result `json:"results"`
	}
	b, _ := os.ReadFile(js)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	rs := rep.Results
	// grpc, rsocket, http1, h2c: 2 chunks x 2 sources; tus only 64KiB;
	// an auto cell per source for grpc, rsocket and tus.
	if len(rs) != 4*4+2+3*2 {
		t.Fatalf("%d results:\n%s", len(rs), out.String())
	}
	autos := 0
	for _, r := range rs {
		if r.MBps <= 0 || len(r.Seconds) != 1 {
			t.Fatalf("%+v", r)
		}
		if r.Chunk == 0 {
			autos++
		}
	}
	if autos != 6 {
		t.Fatalf("%d auto cells:\n%s", autos, out.String())
	}
	if s, _ := os.ReadFile(svg); !strings.Contains(string(s), "<polyline") {
		t.Fatal("no chart")
	}
}
