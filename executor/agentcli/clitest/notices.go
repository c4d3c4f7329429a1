package clitest

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

// Notices parses lines (a CLI's stream) with the parser newParser makes,
// hands stderr to it when it reads stderr (agentcli.StderrReader) and
// returns the notices it raised, as "code prop=value" for key, with the
// outcome.
func Notices[O any](t *testing.T, lines, stderr, key string, newParser func(emit chat.EmitFunc) Parser[O]) ([]string, O) {
	t.Helper()
	var log chattest.Recorder
	p := newParser(log.Emit)
	if err := p.Parse(strings.NewReader(lines)); err != nil {
		t.Fatal(err)
	}
	if sr, ok := p.(interface{ Stderr(string) }); ok {
		sr.Stderr(stderr)
	}
	out := p.Close()
	chattest.Check(t, log.Events())
	var got []string
	for _, e := range log.Starts("notice") {
		v, _ := e.Props[key].(string)
		got = append(got, e.Props["code"].(string)+" "+key+"="+v)
	}
	return got, out
}
