package cluster

import (
	"os"
	"syscall"
)

// fsyncHoldingP fsyncs f with a raw system call, which the Go runtime does
// not see (walsync.go says why). It reports false, having synced nothing,
// when the file's own Sync should do it: a file without a descriptor, a
// closed one (whose Sync says so in os's words), or an fsync a signal
// interrupted (sysmon signals a P it sees running for 10 ms: on a file
// system whose fsync a signal can cut short, retrying raw could go on).
func fsyncHoldingP(f any) (bool, error) {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	var errno syscall.Errno
	// Control keeps the descriptor open while the call runs.
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.RawSyscall(syscall.SYS_FSYNC, fd, 0, 0)
	}); err != nil || errno == syscall.EINTR {
		return false, nil
	}
	if errno != 0 {
		name := "segment"
		if n, ok := f.(interface{ Name() string }); ok {
			name = n.Name()
		}
		return true, &os.PathError{Op: "sync", Path: name, Err: errno}
	}
	return true, nil
}
