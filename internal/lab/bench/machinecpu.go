package bench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// MachineCPU is a reading of /proc/stat's first line: the jiffies every
// CPU of the machine spent busy and idle since boot. Two readings give
// the share of the machine a run kept busy, every process counted (the
// Kafka broker's too), which tells a run bound by CPU (near 1) from one
// bound by waiting.
type MachineCPU struct{ busy, idle uint64 }

// ReadMachineCPU reads /proc/stat; ok is false where there is none.
func ReadMachineCPU() (c MachineCPU, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return c, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		return c, false
	}
	return parseCPULine(line)
}

// parseCPULine reads /proc/stat's "cpu" line (proc(5)).
func parseCPULine(line []byte) (c MachineCPU, ok bool) {
	if !bytes.HasPrefix(line, []byte("cpu ")) {
		return c, false
	}
	// user nice system idle iowait irq softirq steal ...: iowait is idle
	// (a CPU waiting for a disk could run something else).
	for i, field := range bytes.Fields(line)[1:] {
		v, err := strconv.ParseUint(string(field), 10, 64)
		if err != nil {
			return c, false
		}
		switch i {
		case 3, 4:
			c.idle += v
		case 0, 1, 2, 5, 6, 7:
			c.busy += v
		}
	}
	return c, true
}

// BusySince is the share of the machine's CPUs busy between from and c
// (0 to 1; -1 if nothing was counted).
func (c MachineCPU) BusySince(from MachineCPU) float64 {
	busy, idle := c.busy-from.busy, c.idle-from.idle
	if busy+idle == 0 {
		return -1
	}
	return float64(busy) / float64(busy+idle)
}
