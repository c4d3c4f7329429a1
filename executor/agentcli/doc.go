// Package agentcli is the one driver of the coding-agent CLI executors
// (claude, codex, gemini, opencode, cursor) and what they share.
//
// Executor is the driver: every turn of every CLI goes through its Run,
// in one sequence (driver.go): the request checked, the chat's CLI state
// in the workspace made the sandbox user's and the CLI's homes emptied
// but for its sessions (state.go, ResetHome), the CLI's own preparation
// (CLI.Prepare: its configuration files and command), the process
// started through the bridge (Start), its output read line by line and
// handed to the CLI's parser (CLI.NewParser), the wait with its watchdogs
// (Run.Wait), the end classified (Exit.Failure), and the session recorded
// or the CLI kept for the chat's next turn. A CLI brings only what is its
// own (CLI, Profile); one that can take a chat's next message on the
// process that answered the last one also implements Keeper, the
// keep-alive extension point (keep.go), and the driver keeps it running
// between the turns. Adding an executor is a package with a CLI and a
// line in the registry (pipeline.DefaultExecutors).
//
// Beside the driver, the parts of a stream parser every CLI needs: event
// ids, notices, the session event, line counts and the common outcome
// (Events, Chat, LineStats, Outcome); reading a stream line by line
// without a length limit (LineReader, with a hook for readers that elide
// huge lines); the MCP servers, with secrets kept out of the
// configuration file (ResolveMCP, MCPFormat); git that runs nothing of
// the workspace's configuration (GitEnv); secrets redacted (Secrets,
// Redact). Package clitest holds the matching test helpers.
//
// A turn's events go to the request's Emit from the driver's goroutine
// and the one reading the CLI's output: the pipeline's turn, which owns
// their order, serializes them; none is emitted once Run returned.
package agentcli
