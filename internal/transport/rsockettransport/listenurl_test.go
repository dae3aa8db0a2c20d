package rsockettransport

import "testing"

// TestCheckListenURL: the sink's --listen-rsocket takes tcp://HOST:PORT
// or ws://HOST:PORT[/PATH]; a path on tcp:// was ignored before, now
// refused like a missing port or another scheme.
func TestCheckListenURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"tcp://127.0.0.1:0":         true,
		"ws://127.0.0.1:0/rsocket":  true,
		"ws://127.0.0.1:0":          true,
		"tcp://127.0.0.1:0/rsocket": false,
		"tcp://127.0.0.1:0/":        false,
		"tcp://127.0.0.1:0?x=1":     false,
		"tcp://127.0.0.1":           false,
		"tls://127.0.0.1:0":         false,
	} {
		if _, err := CheckListenURL(raw); (err == nil) != ok {
			t.Errorf("CheckListenURL(%q): %v, want ok=%v", raw, err, ok)
		}
	}
}
