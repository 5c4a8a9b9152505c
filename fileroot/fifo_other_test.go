//go:build !unix

package fileroot_test

import "errors"

const haveFIFO = false

func mkfifo(string) error { return errors.New("no FIFOs here") }
