//go:build !linux

package docker

import (
	"errors"
	"syscall"

	"github.com/agentbox/agentbox/sandbox"
)

var errCrossDevice = syscall.EXDEV

var errNoMounts = errors.New("attaching a workspace to a running container needs Linux")

func shareMount(string) error           { return errNoMounts }
func bindOver(string, string) error     { return errNoMounts }
func hideIn(string, string, bool) error { return errNoMounts }
func unmountAll(string) error           { return nil }
func propagated(int, int) error         { return sandbox.ErrNotPoolable }
