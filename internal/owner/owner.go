// Package owner names the process that owns what it leaves on the host (a
// sandbox container, a bridge socket folder) and tells whether that process
// still runs. A server starting after a crash removes what a dead process
// left and spares what a live one (a second server, an `agentbox run`)
// still uses: the same rule for containers and for files.
package owner

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Self names this process: "HOST/PID/START", where START is the process's
// start time in clock ticks since boot (so a reused pid does not pass for
// it).
func Self() string { return Of(os.Getpid()) }

// Of names the process pid of this host as Self does ("HOST/PID/" when it
// does not run).
func Of(pid int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, pid, procStart(pid))
}

// Alive reports whether the process named by id (a Self of some process)
// may still run. Ids of other hosts, and ids it cannot read, count as
// alive: only a grace period may remove what they own.
func Alive(id string) bool {
	parts := strings.Split(id, "/")
	if len(parts) != 3 {
		return true
	}
	if host, _ := os.Hostname(); parts[0] != host {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return true
	}
	start := procStart(pid)
	if start == "" {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return err == nil // no such process: dead
	}
	return parts[2] == "" || start == parts[2]
}

// procStart is the start time of process pid in clock ticks since boot
// (field 22 of /proc/PID/stat), or "" when it cannot be read.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces; fields count from after
	// its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}
