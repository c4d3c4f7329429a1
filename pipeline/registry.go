package pipeline

import (
	"github.com/agentbox/agentbox/claude"
	"github.com/agentbox/agentbox/cursor"
	"github.com/agentbox/agentbox/executor"
)

// DefaultExecutors returns the executor registry, keyed by the sandbox
// block's command. It is one explicit map; constructors have no side
// effects.
func DefaultExecutors() map[string]executor.Executor {
	return map[string]executor.Executor{
		"claude": claude.New(claude.Options{}),
		"cursor": cursor.New(cursor.Options{}),
	}
}
