//go:build !unix

package notify

import "os/exec"

// killGroup keeps exec's default: only the program itself is killed at the
// timeout.
func killGroup(*exec.Cmd) {}
