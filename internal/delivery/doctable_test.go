package delivery

import (
	"os"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The state tables in the package documentation (doc.go), in
// docs/protocol.md and in TABLES.md have a column for every state and a
// row for every event kind the code defines, and nothing else: a new event
// or state cannot be added without documenting it.
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
	for _, file := range []string{"doc.go", "../../docs/protocol.md", "TABLES.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tables := docTables(string(b))
		for _, want := range []struct {
			name           string
			states, events []string
		}{
			{"Sender", senderStates, senderEvents},
			{"Receiver", receiverStates, receiverEvents},
		} {
			// A machine's table is the one whose columns are its states.
			var tab *docTable
			for i := range tables {
				if slices.Equal(sorted(tables[i].states), sorted(want.states)) {
					tab = &tables[i]
				}
			}
			if tab == nil {
				t.Errorf("%s: no %s state table with the columns %v", file, want.name, want.states)
				continue
			}
			if got := sorted(tab.events); !slices.Equal(got, sorted(want.events)) {
				t.Errorf("%s: the %s table's rows cover the events %v; the code defines %v", file, want.name, got, want.events)
			}
		}
	}
}

// docTable is a state table: its state columns and the distinct events
// its rows name.
type docTable struct{ states, events []string }

// docTables finds the tables whose first header cell is "event \ state"
// (in any case, either backslash) in Markdown or in a Go comment's
// indented block.
func docTables(text string) []docTable {
	var out []docTable
	var cur *docTable
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "//"))
		if !strings.HasPrefix(line, "|") {
			cur = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		first := strings.ToLower(cells[0])
		switch {
		case strings.HasPrefix(first, "event") && (strings.Contains(first, `\`) || strings.Contains(first, "＼")):
			out = append(out, docTable{states: cells[1:]})
			cur = &out[len(out)-1]
		case cur == nil || strings.HasPrefix(first, "---") || strings.HasPrefix(first, "-"):
		default:
			// The event is the row's first word; a continuation line of a
			// wrapped row starts with nothing or with lower case.
			word := strings.TrimLeft(cells[0], "`")
			end := strings.IndexFunc(word, func(r rune) bool { return !unicode.IsLetter(r) })
			if end >= 0 {
				word = word[:end]
			}
			if word != "" && unicode.IsUpper(rune(word[0])) && !slices.Contains(cur.events, word) {
				cur.events = append(cur.events, word)
			}
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
