package sandbox

import "errors"

// Errors returned by sandboxes and workspaces. Callers match them with
// errors.Is; the JS API maps each to a stable code (in parentheses).
var (
	// ErrPathOutside: a path resolves outside the workspace, directly or
	// through a symlink (SANDBOX_PATH_OUTSIDE).
	ErrPathOutside = errors.New("path is outside the workspace")
	// ErrNotFound: a file, directory or sandbox does not exist (NOT_FOUND).
	ErrNotFound = errors.New("not found")
	// ErrExecTimeout: a command ran past its timeout and was killed
	// (EXEC_TIMEOUT).
	ErrExecTimeout = errors.New("command timed out")
	// ErrInvalidID: a user or chat id is not safe to use in a path
	// (INVALID_ID).
	ErrInvalidID = errors.New("invalid id")
	// ErrEngineUnavailable: the runtime's engine (Docker daemon, bwrap) is
	// missing or not answering (SANDBOX_UNAVAILABLE).
	ErrEngineUnavailable = errors.New("sandbox engine unavailable")
	// ErrRemoved: the sandbox was removed (SANDBOX_REMOVED).
	ErrRemoved = errors.New("sandbox removed")
)
