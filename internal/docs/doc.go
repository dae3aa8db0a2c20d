// Package docs has no code: its tests keep the documents in docs/ true to
// the code they describe, and the package graph in its layers
// (layers_test.go: the product imports neither internal/lab nor
// internal/testkit, and no import points up).
package docs
