package post

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/xfer/diskstore"
)

// TestPostAnswers: a POST's refusals answer as tus answers them (a busy
// name 409, too large 413), and a file that cannot land (its name taken
// by a directory) answers 500 and leaves no partial. Before, every
// refusal was a 400 and the partial stayed until --expire (found by
// hand, 2026-11-29). (A directory holding the name is now refused when
// the upload begins, with 400.)
func TestPostAnswers(t *testing.T) {
	dir := t.TempDir()
	s, err := diskstore.Open(dir, diskstore.Options{MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(Handler(s))
	defer srv.Close()
	post := func(name string, body []byte) int {
		t.Helper()
		resp, err := http.Post(srv.URL+"/post/"+name, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("big", make([]byte, 2<<20)); got != http.StatusRequestEntityTooLarge {
		t.Errorf("over --max-size: %d, want 413", got)
	}
	busy, err := s.Begin("busy", 10, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := post("busy", []byte("0123456789")); got != http.StatusConflict {
		t.Errorf("a name being written: %d, want 409", got)
	}
	busy.Release()
	if err := os.Mkdir(filepath.Join(dir, "taken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := post("taken", []byte("cannot land")); got != http.StatusBadRequest {
		t.Errorf("a name taken by a directory: %d, want 400", got)
	}
	if s.Partials() != 1 { // busy's, released, kept for its client
		t.Errorf("%d partial uploads left, want only the released one", s.Partials())
	}
	if got := post("fine", []byte("lands")); got != http.StatusOK {
		t.Errorf("a good POST: %d", got)
	}
}
