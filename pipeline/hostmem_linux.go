package pipeline

import "golang.org/x/sys/unix"

// hostMemory is the host's total memory in bytes (0: unknown).
func hostMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
