package assistant

// Defaults and bounds of package.yao "failures": how many steps of a
// pattern make the agent look stuck (seed 004's failure detection).
const (
	DefaultRepeatedToolFailure = 3
	DefaultNoProgress          = 4
	DefaultToolRejection       = 3
	maxFailureThreshold        = 100
)

// Failures are the thresholds of the failure patterns a sandboxed turn
// watches for; each raises a notice event with a suggested action once
// the agent repeats the pattern that many times. A zero field means the
// default; Off (negative) turns that notice off.
type Failures struct {
	// RepeatedToolFailure: consecutive failures of one tool.
	RepeatedToolFailure int
	// NoProgress: consecutive tool results that add nothing new (empty,
	// or the same as a result the turn already had).
	NoProgress int
	// ToolRejection: denials of one tool (a permission refused) with no
	// successful call of it in between.
	ToolRejection int
}

// Off is a threshold that turns its notice off (package.yao's 0).
const Off = -1

// Thresholds returns f's thresholds with the defaults applied: 0 for one
// that is off.
func (f Failures) Thresholds() (repeated, noProgress, rejection int) {
	pick := func(v, def int) int {
		switch {
		case v < 0:
			return 0
		case v == 0:
			return def
		}
		return v
	}
	return pick(f.RepeatedToolFailure, DefaultRepeatedToolFailure),
		pick(f.NoProgress, DefaultNoProgress),
		pick(f.ToolRejection, DefaultToolRejection)
}

// rawFailures is package.yao "failures". A pointer tells an absent member
// from a 0 (off).
type rawFailures struct {
	RepeatedToolFailure *int `json:"repeated_tool_failure"`
	NoProgress          *int `json:"no_progress"`
	ToolRejection       *int `json:"tool_rejection"`
}

// parseFailures checks package.yao "failures": each member 0 (off) to
// maxFailureThreshold. The patterns are read from a coding agent's
// stream, so the block needs a sandbox.
func parseFailures(d *doc, r *rawFailures, sandboxed bool) Failures {
	var f Failures
	if !sandboxed {
		d.errPath("failures", "failures sets when a coding agent looks stuck: it needs a sandbox block (a direct assistant runs no tools of its own)")
		return f
	}
	for _, m := range []struct {
		name string
		v    *int
		dst  *int
	}{
		{"repeated_tool_failure", r.RepeatedToolFailure, &f.RepeatedToolFailure},
		{"no_progress", r.NoProgress, &f.NoProgress},
		{"tool_rejection", r.ToolRejection, &f.ToolRejection},
	} {
		if m.v == nil {
			continue
		}
		switch n := *m.v; {
		case n < 0 || n > maxFailureThreshold:
			d.errPath("failures."+m.name, "failures.%s %d is out of range: want 1 to %d steps, or 0 to turn the notice off", m.name, n, maxFailureThreshold)
		case n == 0:
			*m.dst = Off
		default:
			*m.dst = n
		}
	}
	return f
}
