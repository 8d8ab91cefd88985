// Package layering holds no code, only tests: they keep the package
// directions of docs/design.md true. TestImports asserts from `go list` which
// package may import which (the rules table in layering_test.go is the single
// source; the table in docs/design.md is checked against it), and
// TestDeterminism keeps the wall clock, global randomness and the environment
// out of the packages whose output every replica must reproduce exactly.
package layering
