//go:build !unix

package notify

import "os/exec"

// KillGroup keeps exec's default: only the program itself is killed at the
// timeout.
func KillGroup(*exec.Cmd) {}
