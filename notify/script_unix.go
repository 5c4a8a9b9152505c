//go:build unix

package notify

import (
	"os/exec"
	"syscall"
)

// KillGroup runs the program in its own process group and kills the whole
// group at the timeout, so that children it started do not outlive it.
func KillGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
