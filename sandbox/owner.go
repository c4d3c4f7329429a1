package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/owner"
)

// LabelRun holds the id of the runtime object (one per server process) that
// created a sandbox's container or pod; with the instance label it tells a
// reaper whether the owner still lives.
const LabelRun = "dev.agentbox.run"

// NewRunID names a runtime object of this process for LabelRun: the
// process (owner.Self: host, pid and start time) plus a random part for
// runtimes created within one process.
func NewRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return owner.Self() + "/" + hex.EncodeToString(b)
}

// RunAlive reports whether the process that made a run id (NewRunID) may
// still be running (owner.Alive). Ids of other hosts, of an older format,
// or unreadable ones count as alive: only a reaper's grace period may reap
// those.
func RunAlive(run string) bool {
	i := strings.LastIndexByte(run, '/')
	if i < 0 || strings.Count(run, "/") != 3 {
		return true
	}
	return owner.Alive(run[:i])
}

// Owner is who made a sandbox's container or pod, as its labels say.
type Owner struct {
	Instance string
	Run      string
	// Created is when it was made (the earlier of the engine's record and
	// LabelCreated).
	Created time.Time
}

// Orphaned is the reapers' one rule (nomad's reconcile_dangling): whether
// a labelled sandbox object that no live sandbox of this runtime tracks is
// dangling, and why. It is when it was made by this run (self: a failed
// cleanup), or by a process that is gone (alive says so: a crashed server,
// a killed `agentbox run`, whatever instance it belonged to), or by
// another instance longer ago than grace (another live process, or one
// whose liveness cannot be told: another host on a shared engine or
// cluster, an older label format).
func Orphaned(o Owner, self string, now time.Time, grace time.Duration, alive func(run string) bool) (reason string, dangling bool) {
	switch {
	case o.Run == self:
		return "not owned by any request of this run", true
	case !alive(o.Run):
		return fmt.Sprintf("its process is gone (instance %q)", o.Instance), true
	case now.Sub(o.Created) > grace:
		return fmt.Sprintf("of instance %q, older than %s", o.Instance, grace), true
	}
	return "", false
}

// KillGroupScript is run as `/bin/sh -c KillGroupScript PIDFILE` in a
// sandbox to kill a command started by an exec whose wrapper wrote its pid
// to PIDFILE: engines (Docker, Kubernetes) have no API to kill an exec, and
// each exec starts as a session and process-group leader (runc calls
// setsid), so the script kills the group, the leader and, where pkill
// exists, the whole session. It waits up to a second for the pid file and
// exits 3 when none appears.
const KillGroupScript = `f=$0; i=0
while [ ! -s "$f" ] && [ $i -lt 100 ]; do sleep 0.01; i=$((i+1)); done
[ -s "$f" ] || exit 3
p=$(cat "$f")
kill -KILL -- "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
command -v pkill >/dev/null 2>&1 && pkill -KILL -s "$p" 2>/dev/null
rm -f "$f"; exit 0`
