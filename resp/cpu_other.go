//go:build !unix

package resp

// cpuSection is INFO cpu where getrusage does not exist: empty.
func cpuSection() InfoSection { return InfoSection{Name: "CPU"} }
