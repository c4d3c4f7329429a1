package claude

import "github.com/agentbox/agentbox/executor"

var _ executor.RunFiles = (*Executor)(nil)

// RunFiles lists the files a run writes into the workspace and removes
// when it ends: the system prompt file.
func (e *Executor) RunFiles() []string { return []string{SystemPromptFile} }
