package bridge

import (
	"fmt"
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill the command if the bridge dies, so a
// killed `agentbox bridge run` never leaves the CLI running without its
// proxy.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// Harden makes this process non-dumpable, so that processes of the same
// user (the agent's) can neither open its /proc/PID/fd (the CLI's output
// and input pass through the relays) nor read its environment nor ptrace
// it. The in-sandbox commands call it first.
func Harden() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", errno)
	}
	return nil
}
