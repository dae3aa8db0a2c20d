package s3store

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
)

// partials uploads each of pieces as a finished partial upload and
// returns their ids.
func partials(t *testing.T, s *Store, pieces ...[]byte) []string {
	t.Helper()
	var ids []string
	for _, p := range pieces {
		u, err := s.BeginPartial(int64(len(p)), "")
		if err != nil {
			t.Fatal(err)
		}
		writeChunks(t, u, p, 0, len(p), 1<<20)
		if _, err := u.Finish(nil, "test"); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.Info().ID)
		u.Release()
	}
	return ids
}

// TestS3ConcatCopiesParts: partials of at least S3's smallest part (but
// the last) become the final upload's parts by copies inside the store,
// their bytes not written again by the server; partials smaller than
// that are fed through the write path. Either way the file lands whole
// under its name only, with nothing of the partials left; a wrong
// SHA-256 lands nothing and leaves the partials to be used again.
func TestS3ConcatCopiesParts(t *testing.T) {
	f := newFixture(t)
	s := f.server(Options{})
	data := randomBytes(2*minPart+3<<20+11, 51)
	for _, c := range []struct {
		name   string
		cuts   []int
		copied bool
	}{
		{"copied.bin", []int{minPart + 1, 2*minPart + 1}, true},
		{"fed.bin", []int{1 << 20, minPart + 2<<20}, false},
	} {
		pieces := [][]byte{data[:c.cuts[0]], data[c.cuts[0]:c.cuts[1]], data[c.cuts[1]:]}
		ids := partials(t, s, pieces...)
		if _, err := s.Concat(c.name, make([]byte, 32), "", ids); !errors.Is(err, xfer.ErrChecksum) {
			t.Fatalf("%s with a wrong SHA-256: %v, want a checksum mismatch", c.name, err)
		}
		if _, err := f.object(c.name); err == nil {
			t.Fatalf("%s is visible after a checksum mismatch", c.name)
		}
		received := s.Stats.BytesReceived.Load()
		in, err := s.Concat(c.name, sum256(data), "", ids)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !in.Finished || in.Size != int64(len(data)) || len(in.Parts) != 3 {
			t.Fatalf("%s: %+v", c.name, in)
		}
		checkLanded(t, f, c.name, data)
		if again := s.Stats.BytesReceived.Load() - received; c.copied != (again == 0) {
			t.Fatalf("%s: the server wrote %d bytes again; copied inside the store: %v", c.name, again, c.copied)
		}
		for _, id := range ids {
			if _, err := f.object(stateDir + "part/" + id); err == nil {
				t.Fatalf("%s: partial %s left", c.name, id)
			}
			if _, err := s.Concat("again.bin", nil, "", []string{id}); !errors.Is(err, xfer.ErrNotPartial) {
				t.Fatalf("%s: a used partial joined again: %v", c.name, err)
			}
		}
	}
}

// TestS3ExpireRemovesUnusedPartials: a finished partial upload no final
// upload used goes with --expire, its hidden object with its record, so
// a client that never sends the final upload leaves nothing behind.
func TestS3ExpireRemovesUnusedPartials(t *testing.T) {
	f := newFixture(t)
	var clk clock
	s := f.server(Options{Expire: time.Hour, Now: clk.now})
	ids := partials(t, s, randomBytes(1<<20, 52))
	if n := s.Expire(clk.now()); n != 0 {
		t.Fatalf("Expire before the hour removed %d", n)
	}
	clk.advance(2 * time.Hour)
	s.Expire(clk.now())
	if _, err := f.object(stateDir + "part/" + ids[0]); err == nil {
		t.Fatal("an expired partial upload's object is still there")
	}
	if _, err := s.StatID(ids[0]); !errors.Is(err, xfer.ErrNotFound) {
		t.Fatalf("StatID of an expired partial: %v", err)
	}
}

// TestS3PartialNotResumedByName: a partial upload is named by its id;
// an upload of a file of that name (gRPC, RSocket Begin by name) starts
// an upload of its own and does not write into the hidden partial.
func TestS3PartialNotResumedByName(t *testing.T) {
	f := newFixture(t)
	s := f.server(Options{})
	p, err := s.BeginPartial(10, "")
	if err != nil {
		t.Fatal(err)
	}
	id := p.Info().ID
	p.Release()
	u, err := s.Begin(id, 10, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Release()
	if u.Info().ID == id || u.Info().Partial {
		t.Fatalf("Begin of the name %s resumed the partial upload: %+v", id, u.Info())
	}
}
