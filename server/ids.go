package server

import "github.com/agentbox/agentbox/sandbox"

// validateID checks a user or chat id before it reaches the backend, with
// the same rule the sandbox applies to path components. The error wraps
// sandbox.ErrInvalidID and says what is wrong.
func validateID(kind, id string) error { return sandbox.ValidateID(kind, id) }
