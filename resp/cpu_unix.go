//go:build unix

package resp

import (
	"strconv"
	"syscall"
)

// cpuSection is INFO cpu: getrusage of the process and of its children, in
// Redis's format (seconds with six decimals). Go runs on many threads, so
// Redis's *_main_thread fields are left out.
func cpuSection() InfoSection {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) string {
		return strconv.FormatInt(int64(t.Sec), 10) + "." + pad6(int64(t.Usec))
	}
	return InfoSection{Name: "CPU", Fields: [][2]string{
		{"used_cpu_sys", tv(self.Stime)},
		{"used_cpu_user", tv(self.Utime)},
		{"used_cpu_sys_children", tv(children.Stime)},
		{"used_cpu_user_children", tv(children.Utime)},
	}}
}

func pad6(us int64) string {
	s := strconv.FormatInt(us, 10)
	for len(s) < 6 {
		s = "0" + s
	}
	return s
}
