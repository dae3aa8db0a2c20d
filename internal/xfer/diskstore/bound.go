package diskstore

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
)

// DefaultMaxPartials is Options.MaxPartials' default.
//
// Partial uploads are kept until --expire (a day by default) for their
// clients to resume, and each costs its files and about 700 bytes of
// memory. Without a bound a client creating uploads in a loop grows both
// without end: 100 tus clients that create an upload, send half a MiB and
// reset, again and again, left 21,775 partials and 2.9 GB in 35 s (issue
// 23; scripts/hostile-listeners.sh, xfer-tus/reset), and a day of that is
// 60 million. Ten thousand is far above the uploads one server has in
// flight (each active one holds a connection; the listeners admit 1,024)
// and bounds the records at about 7 MB.
const DefaultMaxPartials = 10_000

// warnEvery: an eviction is logged at most once a minute (the counter
// sluice_xfer_evicted_total counts every one).
const warnEvery = time.Minute

// The store keeps at most Options.MaxPartials partial uploads, and as many
// records of finished uploads (BeginKept). A new upload beyond the bound
// evicts the partial idle the longest, as --expire would have later: its
// client, if it comes back, finds it gone and starts again (tus clients
// do on a 404), which costs it its progress but never correctness. Under
// a flood of new uploads the honest partials idle the longest go first; a
// bound that refused new uploads instead would let that flood shut out
// every honest client until --expire. A finished upload's record beyond
// the bound evicts the oldest such record (the landed file stays).
//
// s.idle orders the idle partials by when they were last let go (front:
// the oldest); an upload being written is not in it. s.doneOrder orders
// the finished records by when they finished. Both under s.mu.

// markIdleLocked puts u, just let go, at the back of the idle order.
func (s *Uploads) markIdleLocked(u *Upload) {
	if u.idleAt == nil && s.byID[u.rec.ID] == u {
		u.idleAt = s.idle.PushBack(u)
	}
}

// markBusyLocked takes u out of the idle order (a writer took it, or it
// is gone).
func (s *Uploads) markBusyLocked(u *Upload) {
	if u.idleAt != nil {
		s.idle.Remove(u.idleAt)
		u.idleAt = nil
	}
}

// dropLocked forgets u: the indexes and the idle order.
func (s *Uploads) dropLocked(u *Upload) {
	if s.byID[u.rec.ID] == u {
		delete(s.byID, u.rec.ID)
	}
	if s.byName[u.rec.Name] == u {
		delete(s.byName, u.rec.Name)
	}
	s.markBusyLocked(u)
}

// makeRoomLocked evicts idle partials, the longest idle first, until a new
// one fits under the bound, and returns them: the caller removes their
// files (removeUploadFiles) once it has let go of s.mu. xfer.ErrNoSpace
// when every partial is being written (with what it evicted before it
// found that).
func (s *Uploads) makeRoomLocked() ([]*Upload, error) {
	var evicted []*Upload
	for len(s.byID) >= s.o.MaxPartials {
		e := s.idle.Front()
		if e == nil {
			return evicted, fmt.Errorf("%w: %d partial uploads, the most this server keeps (--max-partials), are all being written", xfer.ErrNoSpace, len(s.byID))
		}
		u := e.Value.(*Upload)
		s.evictLocked(u)
		evicted = append(evicted, u)
	}
	return evicted, nil
}

// evictLocked forgets the idle partial u; its files are the caller's to
// remove.
func (s *Uploads) evictLocked(u *Upload) {
	s.dropLocked(u)
	s.Stats.Evicted.Add(1)
	if s.evictLog.Due(s.o.Now(), warnEvery) {
		s.log.Warn("the server keeps too many partial uploads; removing the one idle the longest (its client starts it again if it comes back)",
			"max_partials", s.o.MaxPartials, "name", u.rec.Name, "offset", u.rec.Offset, "idle_since", u.rec.Updated,
			"evicted_total", s.Stats.Evicted.Load())
	}
}

// orderRecovered puts the partials and finished records Open found in
// their orders (by their last update, by when they finished) and evicts
// what is beyond the bound (a server restarted with a lower one).
func (s *Uploads) orderRecovered() {
	ups := make([]*Upload, 0, len(s.byID))
	for _, u := range s.byID {
		ups = append(ups, u)
	}
	slices.SortFunc(ups, func(a, b *Upload) int { return a.rec.Updated.Compare(b.rec.Updated) })
	for _, u := range ups {
		s.markIdleLocked(u)
	}
	var evicted []*Upload
	for len(s.byID) > s.o.MaxPartials {
		u := s.idle.Front().Value.(*Upload)
		s.evictLocked(u)
		evicted = append(evicted, u)
	}
	removeUploadFiles(evicted)
	fs := s.recoveredDone
	s.recoveredDone = nil
	slices.SortFunc(fs, func(a, b *xfer.Finished) int { return a.Finished.Compare(b.Finished) })
	for _, f := range fs {
		s.removeFinishedFiles(s.addFinishedLocked(f))
	}
}

// addFinishedLocked records f and forgets the oldest finished records
// beyond the bound, which it returns: the caller removes their files
// (removeFinishedFiles) once it has let go of s.mu.
func (s *Uploads) addFinishedLocked(f *xfer.Finished) []*xfer.Finished {
	if old := s.done[f.ID]; old != nil {
		s.doneOrder.Remove(old)
	}
	s.done[f.ID] = s.doneOrder.PushBack(f)
	var evicted []*xfer.Finished
	for len(s.done) > s.o.MaxPartials {
		old := s.doneOrder.Front().Value.(*xfer.Finished)
		s.removeFinishedLocked(old.ID)
		s.Stats.Evicted.Add(1)
		evicted = append(evicted, old)
	}
	return evicted
}

// removeUploadFiles removes the files of partials already forgotten (no
// index holds them, so no writer can take them meanwhile). Called without
// s.mu.
func removeUploadFiles(us []*Upload) {
	for _, u := range us {
		u.mu.Lock()
		u.removeFiles()
		u.mu.Unlock()
	}
}

// removeFinishedFiles removes the files of finished records already
// forgotten. Called without s.mu.
func (s *Uploads) removeFinishedFiles(fs []*xfer.Finished) {
	for _, f := range fs {
		s.o.FS.Remove(s.donePath(f.ID))
	}
}

// finishedLocked is the record of the finished upload id, or nil.
func (s *Uploads) finishedLocked(id string) *xfer.Finished {
	if e := s.done[id]; e != nil {
		return e.Value.(*xfer.Finished)
	}
	return nil
}

// removeFinishedLocked forgets the record of the finished upload id (its
// file is the caller's) and returns it, or nil.
func (s *Uploads) removeFinishedLocked(id string) *xfer.Finished {
	e := s.done[id]
	if e == nil {
		return nil
	}
	delete(s.done, id)
	s.doneOrder.Remove(e)
	return e.Value.(*xfer.Finished)
}
