package rsocket_test

// The interop results of every peer sit in one table in
// docs/rsocket-interop.md, each peer's rows between
// "<!-- BEGIN <peer> rows -->" and "<!-- END <peer> rows -->". A peer's test
// collects its rows in an interopRows and calls check at the end: with
// SLUICE_INTEROP_UPDATE=1 it rewrites that peer's rows from the run,
// otherwise it checks that the doc lists every case of the run with the
// run's result (notes carry per-run numbers such as frame counts, so they
// are not compared).

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
)

const interopDoc = "../docs/rsocket-interop.md"

// interopRow is one line of the table; peer comes from the interopRows.
type interopRow struct{ dir, transport, kase, result, note string }

// interopRows collects one peer's rows (subtests may add concurrently).
type interopRows struct {
	peer string
	mu   sync.Mutex
	rows []interopRow
}

func (r *interopRows) add(dir, transport, kase, result, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, interopRow{dir, transport, kase, result, note})
}

func (r *interopRows) snapshot() []interopRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]interopRow(nil), r.rows...)
}

// cell makes s safe inside a table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// key is the part of a row that must match the doc: everything but the note.
func (r *interopRows) key(w interopRow) string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s |", r.peer, cell(w.dir), w.transport, cell(w.kase), w.result)
}

// interopUpdate: SLUICE_INTEROP_UPDATE=1 rewrites the table;
// RSOCKET_INTEROP_UPDATE=1 is its old name for the rsocket-go test.
func interopUpdate() bool {
	return os.Getenv("SLUICE_INTEROP_UPDATE") == "1" || os.Getenv("RSOCKET_INTEROP_UPDATE") == "1"
}

// check rewrites (update mode) or checks the peer's rows in the doc. want is
// the number of rows a complete run records: an update from a partial run
// (say, -run on one case) would drop rows, so it is refused.
func (r *interopRows) check(t *testing.T, want int) {
	t.Helper()
	rows := r.snapshot()
	b, err := os.ReadFile(interopDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	begin, end := "<!-- BEGIN "+r.peer+" rows -->\n", "<!-- END "+r.peer+" rows -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q markers", interopDoc, begin, end)
	}
	section := doc[i+len(begin) : j]
	if interopUpdate() {
		if len(rows) == 0 {
			t.Skipf("no %s results in this run (peer missing or -run elsewhere): its rows stay as they are", r.peer)
		}
		if len(rows) != want {
			t.Fatalf("%d of %d %s results recorded: run the whole test to update the table", len(rows), want, r.peer)
		}
		// Their client first, then ours; each transport together; cases
		// in the order they ran (subtests of both directions may finish
		// interleaved).
		sort.SliceStable(rows, func(a, b int) bool {
			oa, ob := strings.HasPrefix(rows[a].dir, "sluice"), strings.HasPrefix(rows[b].dir, "sluice")
			if oa != ob {
				return ob
			}
			return rows[a].transport < rows[b].transport
		})
		var sb strings.Builder
		for _, w := range rows {
			fmt.Fprintf(&sb, "%s %s |\n", r.key(w), cell(w.note))
		}
		doc = doc[:i+len(begin)] + sb.String() + doc[j:]
		if err := os.WriteFile(interopDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, w := range rows {
		if !strings.Contains(section, r.key(w)+" ") {
			t.Errorf("%s does not list %s (rerun with SLUICE_INTEROP_UPDATE=1)", interopDoc, r.key(w))
		}
	}
}
