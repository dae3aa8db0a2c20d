package main

import (
	"strings"
	"testing"
)

// Several --url values go through the balancer; every model still works.
func TestRSocketCLIBalanced(t *testing.T) {
	a, aws := startRSocketServe(t)
	b, _ := startRSocketServe(t)
	urls := strings.Join([]string{a, b, aws}, ",")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rr", "--data", "hi"}, "hi\n"},
		{[]string{"stream", "--data", "3"}, "0\n1\n2\n"},
		{[]string{"fnf", "--data", "x"}, ""},
		{[]string{"push", "--metadata", "m"}, ""},
	} {
		code, out, errs := run(append(append([]string{"rsocket"}, tc.args...), "--url", urls)...)
		if code != 0 || out != tc.want {
			t.Errorf("%v: code %d, out %q, want %q; stderr %s", tc.args, code, out, tc.want, errs)
		}
	}
}
