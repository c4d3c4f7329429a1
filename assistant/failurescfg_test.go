package assistant

import (
	"strings"
	"testing"
)

func TestParseFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src       string
		sandboxed bool
		want      Failures
		prob      string
	}{
		{`{"failures": {}}`, true, Failures{}, ""},
		{`{"failures": {"no_progress": 6, "tool_rejection": 2, "repeated_tool_failure": 5}}`, true, Failures{RepeatedToolFailure: 5, NoProgress: 6, ToolRejection: 2}, ""},
		{`{"failures": {"no_progress": 0}}`, true, Failures{NoProgress: Off}, ""},
		{`{"failures": {"tool_rejection": 101}}`, true, Failures{},
			`f:1:33: failures.tool_rejection 101 is out of range: want 1 to 100 steps, or 0 to turn the notice off`},
		{`{"failures": {"no_progress": -1}}`, true, Failures{},
			`f:1:30: failures.no_progress -1 is out of range: want 1 to 100 steps, or 0 to turn the notice off`},
		{`{"failures": {"no_progress": "4"}}`, true, Failures{}, `f:1:30: failures.no_progress: want an integer, got a string`},
		{`{"failures": {"no_progres": 4}}`, true, Failures{}, `f:1:15: unknown field "no_progres" in failures (did you mean "no_progress"?)`},
		{`{"failures": {"no_progress": 4}}`, false, Failures{},
			`f:1:14: failures sets when a coding agent looks stuck: it needs a sandbox block (a direct assistant runs no tools of its own)`},
	}
	for _, tt := range tests {
		var raw rawPackage
		d := decodeJSONC("f", []byte(tt.src), &raw)
		var got Failures
		if raw.Failures != nil && !d.errors() {
			got = parseFailures(d, raw.Failures, tt.sandboxed)
		}
		var probs []string
		for _, p := range d.probs {
			probs = append(probs, p.String())
		}
		if g := strings.Join(probs, "\n"); g != tt.prob {
			t.Errorf("%s: problems\n got %s\nwant %s", tt.src, g, tt.prob)
			continue
		}
		if tt.prob == "" && got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.src, got, tt.want)
		}
	}
}

func TestFailuresThresholds(t *testing.T) {
	t.Parallel()
	r, n, j := Failures{}.Thresholds()
	if r != DefaultRepeatedToolFailure || n != DefaultNoProgress || j != DefaultToolRejection {
		t.Errorf("defaults = %d %d %d", r, n, j)
	}
	r, n, j = Failures{RepeatedToolFailure: 7, NoProgress: Off, ToolRejection: 1}.Thresholds()
	if r != 7 || n != 0 || j != 1 {
		t.Errorf("set = %d %d %d, want 7 0 1", r, n, j)
	}
}
