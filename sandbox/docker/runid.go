package docker

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// LabelRun holds the id of the runtime object (one per server process) that
// created a container; with the instance label it tells the reaper whether
// the owner still lives.
const LabelRun = "dev.agentbox.run"

// RunID is the run id r labels its containers with.
func RunID(r *Runtime) string { return r.run }

// newRunID names this process: host, pid and the process's start time
// (from /proc, so a reused pid does not pass for it), plus a random part
// for runtimes created within one process.
func newRunID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s/%s", host, os.Getpid(), procStart(os.Getpid()), randHex(4))
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

// runAlive reports whether the process that made a run id may still be
// running. Ids of other hosts, of an older format, or unreadable ones
// count as alive: only the grace period may reap those.
func runAlive(run string) bool {
	parts := strings.Split(run, "/")
	if len(parts) != 4 {
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
