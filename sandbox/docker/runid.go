package docker

import (
	"strings"

	"github.com/agentbox/agentbox/internal/owner"
)

// LabelRun holds the id of the runtime object (one per server process) that
// created a container; with the instance label it tells the reaper whether
// the owner still lives.
const LabelRun = "dev.agentbox.run"

// RunID is the run id r labels its containers with.
func RunID(r *Runtime) string { return r.run }

// newRunID names this process (owner.Self: host, pid and start time), plus
// a random part for runtimes created within one process.
func newRunID() string { return owner.Self() + "/" + randHex(4) }

// runAlive reports whether the process that made a run id may still be
// running (owner.Alive). Ids of an older format or unreadable ones count as
// alive: only the grace period may reap those.
func runAlive(run string) bool {
	i := strings.LastIndexByte(run, '/')
	if i < 0 || strings.Count(run, "/") != 3 {
		return true
	}
	return owner.Alive(run[:i])
}
