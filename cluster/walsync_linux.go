package cluster

import (
	"fmt"
	"syscall"
)

// fsyncHoldingP fsyncs f with a raw system call, which the Go runtime does
// not see (walsync.go says why). It reports false, having done nothing, for
// a file without a descriptor.
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
		for {
			_, _, errno = syscall.RawSyscall(syscall.SYS_FSYNC, fd, 0, 0)
			if errno != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return true, fmt.Errorf("fsync: %w", err)
	}
	if errno != 0 {
		return true, fmt.Errorf("fsync: %w", errno)
	}
	return true, nil
}
