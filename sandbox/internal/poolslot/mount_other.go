//go:build !linux

package poolslot

import (
	"errors"
	"syscall"

	"github.com/agentbox/agentbox/sandbox"
)

var errCrossDevice = syscall.EXDEV

var errNoMounts = errors.New("attaching a workspace to a running sandbox needs Linux")

func shareMount(string) error           { return errNoMounts }
func bindOver(string, string) error     { return errNoMounts }
func hideIn(string, string, bool) error { return errNoMounts }
func unmountAll(string) error           { return nil }

// Propagated is ErrNotPoolable off Linux.
func Propagated(int, int) error { return sandbox.ErrNotPoolable }

// SharedMount is false off Linux.
func SharedMount(string) (bool, error) { return false, nil }

// ProbeMount needs Linux.
func ProbeMount(string) error { return errNoMounts }

// Unmount does nothing off Linux.
func Unmount(string) error { return nil }
