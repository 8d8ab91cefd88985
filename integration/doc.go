// Package integration holds the Jepsen-style fault-injection suite for
// raftset. Every test file is behind the "jepsen" build tag so that
// "go test ./..." stays fast; run it with
//
//	go test -tags jepsen ./integration/ -run TestJepsenSmoke -v
//
// See docs/jepsen.md.
package integration
