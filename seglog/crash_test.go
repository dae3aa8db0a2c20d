package seglog

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// crashRecord is the content a crash child writes for its goroutine g's
// c-th record: self-describing, so the parent can check what it reads.
func crashRecord(g, c int) []byte {
	head := fmt.Sprintf("%d:%d:", g, c)
	return append([]byte(head), bytes.Repeat([]byte{byte('a' + g)}, (c*7919)%3000)...)
}

// TestMain lets the test binary act as the crash child.
func TestMain(m *testing.M) {
	if dir := os.Getenv("SEGLOG_CRASH_CHILD"); dir != "" {
		crashChild(dir)
		return
	}
	if dir := os.Getenv("SEGLOG_CRASH_ROLL_CHILD"); dir != "" {
		crashRollChild(dir, os.Getenv("SEGLOG_CRASH_ROLL_REUSE") != "")
		return
	}
	os.Exit(m.Run())
}

// crashChild appends forever from four goroutines (so appends share
// fsyncs) and prints "offset goroutine counter" for every record Append
// reported durable.
func crashChild(dir string) {
	l, err := Open(dir, WithSegmentBytes(64<<10), WithSync(SyncAlways()), quiet)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	start := int(time.Now().UnixNano() % 1e9) // counters unique across rounds
	for g := 0; g < 4; g++ {
		go func() {
			for c := start; ; c++ {
				off, err := l.Append([][]byte{crashRecord(g, c)})
				if err != nil {
					fmt.Println("ERR", err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %d %d\n", off, g, c)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	select {}
}

// TestCrashKill SIGKILLs a child that appends with fsync per append at a
// random instant, then checks that every offset the child was told is
// durable is present and intact.
// startCrashChild starts this test binary as a crash child with env added,
// returns its stdout's lines, and SIGKILLs it 10-130 ms later: at a random
// instant of its appends.
func startCrashChild(t *testing.T, rng *rand.Rand, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.AfterFunc(time.Duration(10+rng.Intn(120))*time.Millisecond, func() { cmd.Process.Kill() })
	return cmd, lines
}

func TestCrashKill(t *testing.T) {
	rounds := 50
	if s, err := strconv.Atoi(os.Getenv("SLUICE_CRASH_ROUNDS")); err == nil {
		rounds = s
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	dir := t.TempDir()
	durable := map[uint64][]byte{} // every record any round was told is durable
	for round := 0; round < rounds; round++ {
		cmd, lines := startCrashChild(t, rng, "SEGLOG_CRASH_CHILD="+dir)
		for line := range lines {
			if strings.HasPrefix(line, "ERR") {
				t.Fatalf("round %d: child: %s", round, line)
			}
			var off uint64
			var g, c int
			if n, _ := fmt.Sscanf(line, "%d %d %d", &off, &g, &c); n != 3 {
				continue // a line cut by the kill
			}
			durable[off] = crashRecord(g, c)
		}
		cmd.Wait()

		l, err := Open(dir, WithSegmentBytes(64<<10), quiet)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		got := map[uint64]bool{}
		it := l.NewIterator(0, 1<<20)
		for it.Next() {
			if want, ok := durable[it.Offset()]; ok && !bytes.Equal(it.Value(), want) {
				t.Fatalf("round %d: record %d differs from what was acknowledged", round, it.Offset())
			}
			got[it.Offset()] = true
		}
		if it.Err() != nil {
			t.Fatalf("round %d: read: %v", round, it.Err())
		}
		for off := range durable {
			if !got[off] {
				t.Fatalf("round %d: acknowledged record %d lost (log ends at %d)", round, off, l.NextOffset())
			}
		}
		l.Close()
	}
	t.Logf("%d rounds, %d acknowledged records verified", rounds, len(durable))
}

// crashRollChild appends and, every few records, consumes the whole log
// (RemoveBefore at or beyond its end), which rolls the active segment: by
// creating a new one, or with reuse (no segment can be created) by reusing
// its file. It prints "a OFFSET COUNTER" for every durable append and
// "r OFFSET" for every RemoveBefore that returned.
func crashRollChild(dir string, reuse bool) {
	fs := &faultFS{budget: -1}
	l, err := Open(dir, WithSegmentBytes(1<<20), WithSync(SyncAlways()), WithFS(fs), quiet)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(3)
	}
	fs.mu.Lock()
	fs.noCreate = reuse
	fs.mu.Unlock()
	out := bufio.NewWriter(os.Stdout)
	for c := int(time.Now().UnixNano() % 1e9); ; c++ {
		off, err := l.Append([][]byte{crashRecord(0, c)})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(3)
		}
		fmt.Fprintf(out, "a %d %d\n", off, c)
		out.Flush()
		if c%5 == 0 {
			upTo := off + 1 + uint64(c%3) // the end, or beyond it
			if _, err := l.RemoveBefore(upTo); err != nil {
				fmt.Println("ERR", err)
				os.Exit(3)
			}
			fmt.Fprintf(out, "r %d\n", upTo)
			out.Flush()
		}
	}
}

// TestCrashKillRolls SIGKILLs a child that rolls its consumed active
// segment over and over, by a new file or by reusing the old one, at a
// random instant: the log always reopens, never hands out an offset again
// (the next offset is past every durable append and every finished
// RemoveBefore), and keeps every durable record at or above its first
// offset, which only a RemoveBefore moves.
func TestCrashKillRolls(t *testing.T) {
	rounds := 40
	if s, err := strconv.Atoi(os.Getenv("SLUICE_CRASH_ROUNDS")); err == nil {
		rounds = s
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	dir := t.TempDir()
	durable := map[uint64][]byte{}
	var consumed uint64 // every offset below was consumed by a finished RemoveBefore
	var top uint64      // past every durable append
	for round := 0; round < rounds; round++ {
		env := []string{"SEGLOG_CRASH_ROLL_CHILD=" + dir}
		if round%2 == 0 {
			env = append(env, "SEGLOG_CRASH_ROLL_REUSE=1")
		}
		cmd, lines := startCrashChild(t, rng, env...)
		for line := range lines {
			if strings.HasPrefix(line, "ERR") {
				t.Fatalf("round %d: child: %s", round, line)
			}
			var off uint64
			var c int
			if n, _ := fmt.Sscanf(line, "a %d %d", &off, &c); n == 2 {
				durable[off] = crashRecord(0, c)
				top = max(top, off+1)
			} else if n, _ := fmt.Sscanf(line, "r %d", &off); n == 1 {
				consumed = max(consumed, off)
			}
		}
		cmd.Wait()

		l, err := Open(dir, WithSegmentBytes(1<<20), quiet)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		if next := l.NextOffset(); next < top || next < consumed {
			t.Fatalf("round %d: next offset %d, but %d was durable and everything below %d consumed", round, next, top-1, consumed)
		}
		// A RemoveBefore the kill interrupted (or whose line it cut) may
		// have consumed everything up to 3 past the last append, which may
		// be unreported too.
		if first := l.FirstOffset(); first > max(consumed, top+4) {
			t.Fatalf("round %d: log starts at %d, after unconsumed records (consumed below %d, durable below %d)", round, first, consumed, top)
		}
		it := l.NewIterator(max(consumed, l.FirstOffset()), 1<<20)
		got := map[uint64]bool{}
		for it.Next() {
			if want, ok := durable[it.Offset()]; ok && !bytes.Equal(it.Value(), want) {
				t.Fatalf("round %d: record %d differs from what was acknowledged", round, it.Offset())
			}
			got[it.Offset()] = true
		}
		if it.Err() != nil {
			t.Fatalf("round %d: read: %v", round, it.Err())
		}
		for off := range durable {
			if off >= consumed && off >= l.FirstOffset() && !got[off] {
				t.Fatalf("round %d: durable record %d lost", round, off)
			}
		}
		// What a crash cut short of RemoveBefore, the caller redoes.
		consumed = max(consumed, l.FirstOffset())
		l.Close()
	}
	t.Logf("%d rounds, %d durable records, consumed below %d", rounds, len(durable), consumed)
}
