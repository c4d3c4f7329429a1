package assistant

import (
	"strings"
	"testing"
	"time"
)

func TestParseSkills(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want *SkillAuthoring
		prob string
	}{
		{`{"skills": {"authoring": true}}`, &SkillAuthoring{TestMaxTurns: DefaultSkillTestMaxTurns, TestTimeout: DefaultSkillTestTimeout}, ""},
		{`{"skills": {"authoring": true, "test": {"max_turns": 2, "timeout": "45s"}}}`, &SkillAuthoring{TestMaxTurns: 2, TestTimeout: 45 * time.Second}, ""},
		{`{"skills": {"authoring": false}}`, nil, ""},
		{`{"skills": {}}`, nil, ""},
		{`{"skills": {"authoring": true, "test": {"timeout": "1s"}}}`, nil, `f:1:52: skills.test.timeout "1s" is out of range: want 10s to 30m`},
		{`{"skills": {"autoring": true}}`, nil, `f:1:13: unknown field "autoring" in skills (did you mean "authoring"?)`},
	}
	for _, tt := range tests {
		var raw rawPackage
		d := decodeJSONC("f", []byte(tt.src), &raw)
		var got *SkillAuthoring
		if raw.Skills != nil {
			got = parseSkills(d, raw.Skills, true, nil)
		}
		var probs []string
		for _, p := range d.probs {
			probs = append(probs, p.String())
		}
		if g := strings.Join(probs, "\n"); g != tt.prob {
			t.Errorf("%s: problems\n got %s\nwant %s", tt.src, g, tt.prob)
			continue
		}
		if tt.prob == "" && (got == nil) != (tt.want == nil) || got != nil && tt.want != nil && *got != *tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.src, got, tt.want)
		}
	}
}
