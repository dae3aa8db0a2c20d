package main

import (
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/xfer/send"
)

func TestXferChunkFlag(t *testing.T) {
	var c chunkFlag
	for in, want := range map[string]string{"auto": "auto", "64KiB": "64KiB", "1MiB": "1MiB"} {
		if err := c.Set(in); err != nil || c.String() != want {
			t.Errorf("%s: %v %s", in, err, c.String())
		}
	}
	// 9MiB is over gRPC's and RSocket's bound, not tus's: send.CheckChunk
	// refuses it once --to is known (TestFlagValuesChecked).
	for _, bad := range []string{"0", "65MiB", "x"} {
		if err := c.Set(bad); err == nil {
			t.Errorf("--chunk %s accepted", bad)
		}
	}
}

// --chunk's help is made from the constants --chunk auto uses, and
// docs/xfer.md says the same sizes (the help said 1MiB, 64KiB and 16MiB
// while the code sent 512 KiB and 16 KiB; issue 24).
func TestXferAutoChunkHelp(t *testing.T) {
	want := "auto: 512 KiB for gRPC, 128 KiB for RSocket, 16 MiB for tus"
	if got := autoChunkHelp(); got != want {
		t.Errorf("autoChunkHelp() = %q, want %q", got, want)
	}
	doc, err := os.ReadFile("../../docs/xfer.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	for _, s := range []string{
		"sends " + humanSize(send.AutoChunk) + " messages over gRPC",
		humanSize(send.AutoRSocketChunk) + " payloads over RSocket",
		humanSize(send.AutoTUSChunk) + " PATCHes over tus",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("docs/xfer.md does not say %q", s)
		}
	}
}
