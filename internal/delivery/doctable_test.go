package delivery

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// The state tables in docs/protocol.md are generated from the transcripts
// (testdata/sender, testdata/receiver): each cell lists the distinct
// outcomes the transcripts observed in it. TestDocTables fails when the
// doc differs;
//
//	SLUICE_UPDATE_DOCS=1 go test ./internal/delivery/ -run TestDocTables
//
// rewrites it.

const protocolDoc = "../../docs/protocol.md"

func TestDocTables(t *testing.T) {
	doc, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, tab := range []*machineTable{&senderTable, &receiverTable} {
		var m cellMatrix
		if !t.Run(tab.name, func(t *testing.T) {
			m = runTranscripts(t, tab)
			checkCoverage(t, tab, m)
		}) {
			t.Fatalf("the %s transcripts fail; the tables are generated only from passing ones", tab.name)
		}
		table, err := renderTable(tab, m)
		if err != nil {
			t.Fatal(err)
		}
		begin := fmt.Sprintf("<!-- BEGIN GENERATED %s state table: SLUICE_UPDATE_DOCS=1 go test ./internal/delivery/ -run TestDocTables -->\n", tab.name)
		end := fmt.Sprintf("<!-- END GENERATED %s state table -->", tab.name)
		i, j := strings.Index(text, begin), strings.Index(text, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no block %q ... %q", protocolDoc, strings.TrimSpace(begin), end)
		}
		if old := text[i+len(begin) : j]; old != table {
			if os.Getenv("SLUICE_UPDATE_DOCS") != "1" {
				t.Errorf("%s: the %s state table differs from the transcripts; run\n\tSLUICE_UPDATE_DOCS=1 go test ./internal/delivery/ -run TestDocTables\nwant:\n%s", protocolDoc, tab.name, table)
			}
			text = text[:i+len(begin)] + table + text[j:]
		}
	}
	if os.Getenv("SLUICE_UPDATE_DOCS") == "1" && text != string(doc) {
		if err := os.WriteFile(protocolDoc, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", protocolDoc)
	}
}

// renderTable renders a machine's table: a row per event row, a column
// per state; each cell the outcomes seen (effects and actions → new
// state), or "—" with the reason for a cell that is impossible or only
// ever ignored. A legend of the rows follows.
func renderTable(tab *machineTable, m cellMatrix) (string, error) {
	var b strings.Builder
	b.WriteString("| Event ＼ State |")
	for _, st := range tab.states {
		fmt.Fprintf(&b, " %s |", st)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(tab.states)))
	b.WriteByte('\n')
	var errs []string
	for _, row := range tab.rows {
		fmt.Fprintf(&b, "| %s |", rowLabel(row.name))
		for _, st := range tab.states {
			k := cellKey{st, row.name}
			if why, ok := tab.impossible[k]; ok {
				fmt.Fprintf(&b, " — (impossible: %s) |", why)
				continue
			}
			outs := slices.Clone(m[k])
			slices.SortStableFunc(outs, func(a, b string) int { return outcomeRank(tab, a) - outcomeRank(tab, b) })
			why, hasWhy := ignoredReason(tab, k)
			if len(outs) == 1 && outs[0] == "ignored" {
				if !hasWhy {
					errs = append(errs, st+" × "+row.name)
				}
				fmt.Fprintf(&b, " — (ignored: %s) |", why)
				continue
			}
			for i, o := range outs {
				if o == "ignored" {
					if !hasWhy {
						errs = append(errs, st+" × "+row.name)
					}
					outs[i] = "ignored (" + why + ")"
				}
			}
			fmt.Fprintf(&b, " %s |", strings.Join(outs, "; "))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	for _, row := range tab.rows {
		fmt.Fprintf(&b, "- %s: %s.\n", rowLabel(row.name), row.desc)
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("%s: cells only ever ignored need a reason in ignoredWhy: %s", tab.name, strings.Join(errs, ", "))
	}
	return b.String(), nil
}

// rowLabel puts the event kind, the row name's first word, in code style.
func rowLabel(name string) string {
	if name == rowInvalid {
		return "*" + name + "*"
	}
	kind, rest, _ := strings.Cut(name, ",")
	if rest != "" {
		rest = "," + rest
	}
	return "`" + kind + "`" + rest
}

// outcomeRank orders a cell's outcomes: errors and ignored first, then by
// the state they lead to, in column order.
func outcomeRank(tab *machineTable, o string) int {
	switch o {
	case "error":
		return -2
	case "ignored":
		return -1
	}
	_, after, _ := strings.Cut(o, "→ ")
	return slices.Index(tab.states, after)
}

func ignoredReason(tab *machineTable, k cellKey) (string, bool) {
	for _, key := range []cellKey{k, {"*", k.row}, {k.state, "*"}} {
		if why, ok := tab.ignoredWhy[key]; ok {
			return why, true
		}
	}
	return "", false
}

// The tables have a column for every state and rows for every event kind
// the code defines, and nothing else: a new event or state cannot be added
// without transcripts for it, and so without documenting it.
func TestDocTablesCoverCode(t *testing.T) {
	var senderStates, senderEvents, receiverStates, receiverEvents []string
	for s := SenderState(0); !strings.Contains(s.String(), "("); s++ {
		senderStates = append(senderStates, s.String())
	}
	for k := EventKind(1); !strings.Contains(k.String(), "("); k++ { // 0 is Unknown
		senderEvents = append(senderEvents, k.String())
	}
	for s := ReceiverState(0); !strings.Contains(s.String(), "("); s++ {
		receiverStates = append(receiverStates, s.String())
	}
	for k := ReceiverEventKind(1); !strings.Contains(k.String(), "("); k++ {
		receiverEvents = append(receiverEvents, k.String())
	}
	for _, want := range []struct {
		tab            *machineTable
		states, events []string
	}{
		{&senderTable, senderStates, senderEvents},
		{&receiverTable, receiverStates, receiverEvents},
	} {
		if !slices.Equal(want.tab.states, want.states) {
			t.Errorf("%s table columns %v; the code's states are %v", want.tab.name, want.tab.states, want.states)
		}
		var kinds []string
		for _, r := range want.tab.rows {
			if kind, _, _ := strings.Cut(r.name, ","); r.kind != "" && kind != r.kind {
				t.Errorf("%s row %q is for kind %q", want.tab.name, r.name, r.kind)
			}
			if r.kind != "" && !slices.Contains(kinds, r.kind) {
				kinds = append(kinds, r.kind)
			}
		}
		if !slices.Equal(sorted(kinds), sorted(want.events)) {
			t.Errorf("%s table rows cover the events %v; the code defines %v", want.tab.name, kinds, want.events)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
