package diskstore

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/internal/xfer"
)

// doneSuffix names the file, next to the partials, that keeps a finished
// upload's description (BeginKept) until it expires: .partial/ID.done.
const doneSuffix = ".done"

var errBadFinished = errors.New("not a finished upload's record")

// A finished upload is recorded as xfer.Finished.

func (s *Uploads) donePath(id string) string { return filepath.Join(s.partial, id+doneSuffix) }

// keepFinished records the finished upload rec (sum is its SHA-256), on
// disk and in s.done. A failure to write it is logged: the upload landed
// anyway, and a client asking for it later finds it gone (and sends it
// again), as before such records existed.
func (s *Uploads) keepFinished(rec *record, sum []byte) {
	f := &xfer.Finished{ID: rec.ID, Name: rec.Name, Size: rec.Size, Meta: rec.Meta, SHA256: sum,
		Created: rec.Created, Finished: s.o.Now()}
	if err := s.writeFinished(f); err != nil {
		s.log.Warn("keeping a finished upload's record failed; a client asking for it will find it gone", "name", rec.Name, "id", rec.ID, "err", err)
	}
	s.mu.Lock()
	evicted := s.addFinishedLocked(f)
	s.mu.Unlock()
	s.removeFinishedFiles(evicted)
}

// writeFinished writes f's file whole (a temporary file, fsynced, renamed;
// the caller syncs the directory).
func (s *Uploads) writeFinished(f *xfer.Finished) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	path := s.donePath(f.ID)
	tmp, err := s.o.FS.OpenFile(path+".tmp", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = tmp.WriteAt(b, 0)
	if err == nil {
		err = tmp.Datasync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.o.FS.Rename(path+".tmp", path)
	}
	if err != nil {
		s.o.FS.Remove(path + ".tmp")
	}
	return err
}

// loadFinished reads the record of the finished upload id at Open; an
// unreadable one is removed (the upload is then unknown, as it was
// before such records existed).
func (s *Uploads) loadFinished(id string) *xfer.Finished {
	path := s.donePath(id)
	b, err := s.readFile(path)
	var f xfer.Finished
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err == nil && (f.ID != id || f.Size < 0 || xfer.ValidateName(f.Name) != nil) {
		err = errBadFinished
	}
	if err != nil {
		s.log.Warn("a finished upload's record is unreadable; removing it", "id", id, "err", err)
		s.o.FS.Remove(path)
		return nil
	}
	return &f
}

// RemoveFinished forgets the finished upload id (tus termination of a
// finished upload): the file it landed stays. False when there is none.
func (s *Uploads) RemoveFinished(id string) bool {
	s.mu.Lock()
	f := s.removeFinishedLocked(id)
	s.mu.Unlock()
	if f == nil {
		return false
	}
	s.o.FS.Remove(s.donePath(id))
	s.o.FS.SyncDir(s.partial) // a terminated upload does not come back after a crash
	return true
}
