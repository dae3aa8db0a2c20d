package driver

import "testing"

// TestFreshRecords: the loop keeps the records of messages not yet sent
// so a Send a few steps later still takes its record, hands each out once,
// and holds at most freshMax of them and freshMaxBytes.
func TestFreshRecords(t *testing.T) {
	l := &loop{}
	recs := map[uint64]*[]byte{}
	for id := uint64(100); id < 100+freshMax+8; id++ {
		b := make([]byte, 0, 1024)
		recs[id] = &b
		l.addFresh(id, &b)
		l.trimFresh()
		if len(l.fresh) > freshMax {
			t.Fatalf("%d records held, want at most %d", len(l.fresh), freshMax)
		}
	}
	if r := l.takeFresh(100); r != nil {
		t.Errorf("the oldest record should have been released")
	}
	last := uint64(100 + freshMax + 7)
	if r := l.takeFresh(last - 3); r != recs[last-3] {
		t.Errorf("record %d not handed out", last-3)
	}
	if r := l.takeFresh(last - 3); r != nil {
		t.Errorf("record %d handed out twice", last-3)
	}
	if r := l.takeFresh(last + 1); r != nil {
		t.Errorf("a record for an id never spooled")
	}
	if r := l.takeFresh(last); r != recs[last] {
		t.Errorf("record %d not handed out", last)
	}
	// A jump in ids starts over; a big record pushes the old ones out.
	big := make([]byte, 0, freshMaxBytes)
	l.addFresh(last+5, &big)
	l.trimFresh()
	if len(l.fresh) != 1 || l.takeFresh(last+5) != &big || l.freshBytes != 0 {
		t.Errorf("after a jump: %d held, %d bytes", len(l.fresh), l.freshBytes)
	}
	b := make([]byte, 0, freshMaxBytes)
	l.addFresh(last+6, &b)
	c := make([]byte, 0, 16)
	l.addFresh(last+7, &c)
	l.trimFresh()
	if l.freshBytes > freshMaxBytes || l.takeFresh(last+7) != &c {
		t.Errorf("bytes bound: %d held", l.freshBytes)
	}
}
