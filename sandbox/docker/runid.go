package docker

import "github.com/agentbox/agentbox/sandbox"

// LabelRun holds the id of the runtime object (one per server process) that
// created a container (sandbox.NewRunID); with the instance label it tells
// the reaper whether the owner still lives.
const LabelRun = sandbox.LabelRun

// RunID is the run id r labels its containers with.
func RunID(r *Runtime) string { return r.run }
