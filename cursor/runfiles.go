package cursor

import "github.com/agentbox/agentbox/executor"

var _ executor.RunFiles = (*Executor)(nil)

// RunFiles lists the files a run writes into the workspace and removes
// when it ends: the prompt file of a large input.
func (e *Executor) RunFiles() []string { return []string{PromptFile} }
