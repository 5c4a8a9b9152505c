//go:build unix

package fileroot_test

import "syscall"

const haveFIFO = true

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }
