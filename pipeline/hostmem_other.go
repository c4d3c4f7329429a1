//go:build !linux

package pipeline

// hostMemory is the host's total memory in bytes: unknown here, so a
// share of it caps nothing (limits.kept_memory in bytes still does).
func hostMemory() int64 { return 0 }
