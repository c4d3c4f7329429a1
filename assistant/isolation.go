package assistant

import (
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// parseIsolation checks a sandbox isolation at path (app.jsonc's
// sandbox.isolation, an assistant's sandbox.isolation) against the known
// levels and the runtime it will run on, when that is known at load
// ("": the server's default, checked when the sandbox is created). It
// returns "" when the value is absent or wrong.
func parseIsolation(d *doc, path, isolation, runtime string) string {
	if !d.has(path) {
		return ""
	}
	if !sandbox.IsIsolation(isolation) {
		d.errPath(path, "%s: want %s, got %q", path, strings.Join(sandbox.Isolations(), ", "), isolation)
		return ""
	}
	if !checkIsolationRuntime(d, path, path, isolation, runtime) {
		return ""
	}
	return isolation
}

// sandboxIsolation is an assistant's isolation at prefix p ("sandbox."):
// its own sandbox.isolation, else app.jsonc's, checked against the
// assistant's runtime (an assistant may name another runtime than
// app.jsonc's).
func sandboxIsolation(d *doc, p, isolation, runtime string, cfg *AppConfig) string {
	if d.has(p + "isolation") {
		return parseIsolation(d, p+"isolation", isolation, runtime)
	}
	if cfg.Sandbox.Isolation != "" {
		at := p + "runtime"
		if !d.has(at) {
			at = strings.TrimSuffix(p, ".")
		}
		checkIsolationRuntime(d, at, "app.jsonc's sandbox.isolation", cfg.Sandbox.Isolation, runtime)
	}
	return cfg.Sandbox.Isolation
}

// checkIsolationRuntime records an error at path, and reports false, when
// runtime cannot give isolation (named what in the message): a runtime
// never runs a sandbox with a weaker isolation than the one asked for.
func checkIsolationRuntime(d *doc, path, what, isolation, runtime string) bool {
	switch {
	case runtime == "local" && isolation != sandbox.IsolationRunc:
		d.errPath(path, "%s %q: the local runtime (bubblewrap) runs on the host's kernel; %s needs the docker or kubernetes runtime", what, isolation, isolation)
	case runtime == "docker" && isolation == sandbox.IsolationKata:
		d.errPath(path, "%s %q: the docker runtime offers runc and gvisor; Kata runs on the kubernetes runtime, through a RuntimeClass", what, isolation)
	default:
		return true
	}
	return false
}
