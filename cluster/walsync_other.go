//go:build !linux

package cluster

// fsyncHoldingP is Linux's alone; elsewhere every fsync is the file's own
// (on macOS, os.File.Sync is F_FULLFSYNC, which a raw fsync is not).
func fsyncHoldingP(any) (bool, error) { return false, nil }
