package bench

import (
	"runtime"
	"testing"
)

func TestParseCPULine(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	c0, ok := parseCPULine([]byte("cpu  100 0 50 800 50 0 0 0 0 0\n"))
	if !ok {
		t.Fatal("not parsed")
	}
	c1, _ := parseCPULine([]byte("cpu  250 0 100 850 50 0 0 0 0 0\n"))
	if got := c1.BusySince(c0); got != 0.8 { // 200 busy, 50 idle
		t.Errorf("busy %v, want 0.8", got)
	}
	if got := c0.BusySince(c0); got != -1 {
		t.Errorf("busy over nothing %v, want -1", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4\n", "cpu  1 x 3\n", "intr 1 2\n"} {
		if _, ok := parseCPULine([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	if runtime.GOOS == "linux" {
		if _, ok := ReadMachineCPU(); !ok {
			t.Error("no /proc/stat reading on Linux")
		}
	}
}
