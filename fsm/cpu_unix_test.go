//go:build unix

package fsm

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (user and system). On a
// machine shared with other work, wall time per op swings several-fold
// with the scheduler; CPU time per op moves far less.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
