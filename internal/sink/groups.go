package sink

import "fmt"

// maxGroupName is the longest consumer group name, in bytes.
const maxGroupName = 255

func validGroup(name string) error {
	if name == "" || len(name) > maxGroupName {
		return fmt.Errorf("group name of %d bytes: want 1 to %d", len(name), maxGroupName)
	}
	return nil
}
