// Package docs has no code: its tests keep the documents in docs/ true to
// the code they describe.
package docs
