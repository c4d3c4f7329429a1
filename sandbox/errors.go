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
	// ErrSpecialFile: a path names a FIFO, socket or device. The host
	// never opens one (a FIFO's open or read blocks until the agent's side
	// acts); only regular files and folders are read or written
	// (SANDBOX_SPECIAL_FILE). The message names the path and its kind.
	ErrSpecialFile = errors.New("not a regular file or folder")
	// ErrFileTooLarge: a file is larger than what the read may return
	// (FILE_TOO_LARGE).
	ErrFileTooLarge = errors.New("file is too large")
	// ErrDiskFull: the workspace reached its disk limit (sandbox.max_disk)
	// or the host's disk is full (SANDBOX_DISK_FULL).
	ErrDiskFull = errors.New("workspace is full")
	// ErrExecTimeout: a command ran past its timeout and was killed
	// (EXEC_TIMEOUT).
	ErrExecTimeout = errors.New("command timed out")
	// ErrInvalidID: a user or chat id is not safe to use in a path
	// (INVALID_ID).
	ErrInvalidID = errors.New("invalid id")
	// ErrEngineUnavailable: the runtime's engine (Docker daemon, bwrap) is
	// missing or not answering (SANDBOX_UNAVAILABLE).
	ErrEngineUnavailable = errors.New("sandbox engine unavailable")
	// ErrIsolation: the runtime cannot give the isolation a spec asks for
	// (Spec.Isolation), or it is not set up there (gVisor not registered
	// with the engine, no RuntimeClass for it). Create returns it, so
	// hooks never meet it.
	ErrIsolation = errors.New("isolation not available")
	// ErrRemoved: the sandbox was removed (SANDBOX_REMOVED).
	ErrRemoved = errors.New("sandbox removed")
	// ErrInUse: a workspace cannot be removed while a request holds it
	// (Workspaces.Remove; hooks never meet it).
	ErrInUse = errors.New("workspace in use")
)
