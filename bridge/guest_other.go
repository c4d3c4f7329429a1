//go:build !linux

package bridge

import "os/exec"

// setPdeathsig has no equivalent outside Linux; sandboxes are Linux.
func setPdeathsig(*exec.Cmd) {}

// Harden does nothing where processes have no dumpable flag.
func Harden() error { return nil }
