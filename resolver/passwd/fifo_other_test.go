//go:build !unix

package passwd_test

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs here") }
