package sink

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/store/kafkastore"
)

// storeKind says which store Config.Store selects.
type storeKind uint8

const (
	storeEmbedded storeKind = iota
	storeKafka
)

// CheckStore reports whether store is a valid Config.Store, with an error
// saying what is wrong, without connecting anywhere.
func CheckStore(store string) error {
	_, _, err := parseStore(store)
	return err
}

// parseStore parses Config.Store.
func parseStore(s string) (storeKind, *kafkastore.URL, error) {
	switch {
	case s == "" || s == "embedded":
		return storeEmbedded, nil, nil
	case strings.HasPrefix(s, "kafka://"):
		u, err := kafkastore.ParseURL(s)
		return storeKafka, u, err
	}
	return 0, nil, fmt.Errorf("store %q: want \"embedded\" or kafka://HOST:PORT[,HOST:PORT]/TOPIC", s)
}
