package pipeline

import (
	"sort"

	"github.com/agentbox/agentbox/claude"
	"github.com/agentbox/agentbox/codex"
	"github.com/agentbox/agentbox/cursor"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/gemini"
	"github.com/agentbox/agentbox/opencode"
)

// DefaultExecutors returns the executor registry, keyed by the sandbox
// block's command. It is one explicit map; constructors have no side
// effects.
func DefaultExecutors() map[string]executor.Executor {
	return map[string]executor.Executor{
		"claude":   claude.New(claude.Options{}),
		"codex":    codex.New(codex.Options{}),
		"cursor":   cursor.New(cursor.Options{}),
		"gemini":   gemini.New(gemini.Options{}),
		"opencode": opencode.New(opencode.Options{}),
	}
}

// RunFiles lists the files the pipeline's executors write into workspaces
// for one run (executor.RunFiles), sorted: what a crashed server leaves
// behind in them.
func (p *Pipeline) RunFiles() []string {
	seen := map[string]bool{}
	var out []string
	for _, ex := range p.executors {
		if rf, ok := ex.(executor.RunFiles); ok {
			for _, f := range rf.RunFiles() {
				if !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
