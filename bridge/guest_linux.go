package bridge

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill the command if the bridge dies, so a
// killed `agentbox bridge run` never leaves the CLI running without its
// proxy.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
