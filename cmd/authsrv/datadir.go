package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CheckoutDataDir is the data directory when none is given and authsrv
// does not run as a service: "go run ./cmd/authsrv" in a checkout keeps its
// data beside the code.
const CheckoutDataDir = "./authsrv-data"

// ServiceDataDir is the data directory when systemd runs authsrv as a
// service without a StateDirectory= (which the unit in cmd/authsrv/systemd
// sets, and which wins).
const ServiceDataDir = "/var/lib/authsrv"

// dataDirUsage is the -data-dir flag's help.
const dataDirUsage = "data directory (store and keys); default " + CheckoutDataDir +
	", or, when systemd runs authsrv as a service, $STATE_DIRECTORY or " + ServiceDataDir +
	". Only serve creates it"

// defaultDataDir is the -data-dir default. Under systemd it is absolute:
// the first directory of $STATE_DIRECTORY (systemd sets it from
// StateDirectory=), else ServiceDataDir when $INVOCATION_ID says a service
// manager started the process; otherwise CheckoutDataDir. ppid is the
// parent process: $INVOCATION_ID counts only for a child of PID 1 (the
// system manager), because a desktop terminal started by a user's service
// manager passes it on to every shell, where "go run" must keep the
// checkout's directory.
func defaultDataDir(getenv func(string) string, ppid int) string {
	for dir := range strings.SplitSeq(getenv("STATE_DIRECTORY"), ":") {
		if filepath.IsAbs(dir) {
			return filepath.Clean(dir)
		}
	}
	if getenv("INVOCATION_ID") != "" && ppid == 1 {
		return ServiceDataDir
	}
	return CheckoutDataDir
}

// requireDataDir refuses a data directory that does not exist, naming the
// absolute path it looked at. Only serve may create one: any other command
// that did would start a second installation with new keys wherever it
// happened to run. restore says how to restore into a new directory.
func (c *common) requireDataDir(restore bool) error {
	abs, err := filepath.Abs(c.dataDir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", c.dataDir, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		hint := ""
		if abs != ServiceDataDir {
			// Lstat: with DynamicUser= it is a link into /var/lib/private,
			// which only root may enter.
			if _, err := os.Lstat(ServiceDataDir); err == nil {
				hint = " (the service's data is in " + ServiceDataDir + ")"
			}
		}
		if restore {
			return fmt.Errorf("data directory %s does not exist%s: give -data-dir or AUTHSRV_DATA_DIR, or create it to restore into a new one (mkdir -m 0700 %s)", abs, hint, abs)
		}
		return fmt.Errorf("data directory %s does not exist%s: give -data-dir or AUTHSRV_DATA_DIR; only \"authsrv serve\" creates a new one", abs, hint)
	case err != nil:
		return fmt.Errorf("data directory %s: %w", abs, err)
	case !fi.IsDir():
		return fmt.Errorf("data directory %s is not a directory", abs)
	}
	return nil
}
