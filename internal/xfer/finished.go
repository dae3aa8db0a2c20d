package xfer

import "time"

// Finished is what a store keeps of a completed upload begun to be kept
// (tus): its size (so Upload-Offset = Upload-Length), metadata and the
// SHA-256 the server computed, until it expires, so that a client that
// stored the upload's URL finds it complete instead of gone and does not
// send it again. Stores keep it as JSON (the disk store beside its
// partials, the S3 store as a small object): the field names are stored,
// never rename them.
type Finished struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	Meta     string    `json:"meta,omitempty"`
	SHA256   []byte    `json:"sha256"`
	Created  time.Time `json:"created"`
	Finished time.Time `json:"finished"`
	// Partial and Parts: a tus concatenation's partial upload, and the
	// partials a final one was joined from (Info's fields of the same name).
	Partial bool     `json:"partial,omitempty"`
	Parts   []string `json:"parts,omitempty"`
}

// Info describes f as Stat answers it, expiring expire after it finished
// (0: never).
func (f *Finished) Info(expire time.Duration) Info {
	in := Info{ID: f.ID, Name: f.Name, Size: f.Size, Offset: f.Size, Meta: f.Meta, SHA256: f.SHA256,
		Created: f.Created, Updated: f.Finished, Finished: true, Partial: f.Partial, Parts: f.Parts}
	if expire > 0 {
		in.Expires = f.Finished.Add(expire)
	}
	return in
}

// RunExpiry calls expire now and then every quarter of after (at least a
// second, at most a minute apart) until stop is closed: how a store
// removes idle partial uploads and finished records past after.
func RunExpiry(after time.Duration, stop <-chan struct{}, expire func()) {
	every := min(max(after/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		expire()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}
