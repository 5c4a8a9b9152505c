package notify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const defaultScriptTimeout = 10 // seconds

// scriptEnv is the whole environment of a script: it must not inherit the
// server's (which may hold keys or passwords in AUTHSRV_* variables).
var scriptEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}

// scriptPath resolves the script option inside the script directory. The
// name may be relative to the directory or absolute; after resolving
// symbolic links it must lie inside the (resolved) directory. With
// mustExist it must also be an executable regular file; without, a missing
// file is accepted (it may be installed later) if its path stays inside.
func (s *Service) scriptPath(name string, mustExist bool) (string, error) {
	if s.scripts == "" {
		return "", ErrScriptsDisabled
	}
	if strings.TrimSpace(name) == "" {
		return "", paramErr("Missing parameter: script")
	}
	if strings.ContainsRune(name, 0) || hasControl(name) {
		return "", paramErr("The script name contains invalid characters.")
	}
	outside := paramErr("The script %s is outside the script directory.", name)
	dirAbs, err := filepath.Abs(s.scripts)
	if err != nil {
		return "", ErrScriptsDisabled.Wrap(err)
	}
	dir, err := filepath.EvalSymlinks(dirAbs)
	if err != nil {
		return "", ErrScriptsDisabled.Wrap(err)
	}
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	if !within(dir, p) && !within(dirAbs, p) {
		return "", outside
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, os.ErrNotExist) && !mustExist {
		return p, nil
	}
	if err != nil {
		return "", paramErr("The script %s does not exist in the script directory.", name)
	}
	if !within(dir, real) {
		return "", outside
	}
	st, err := os.Stat(real)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		if mustExist {
			return "", paramErr("The script %s is not an executable file.", name)
		}
	}
	return real, nil
}

// within reports whether path p lies inside directory dir (both clean
// and absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// runScript is the script provider: it runs the program with argv
// [phone, text], never through a shell, with an empty environment besides
// PATH and LANG, no stdin and discarded output. In "wait" mode it returns
// the program's result (exit status 0 is success); in "background" mode it
// returns once the program started. Either way the program is killed
// (with its process group, on Unix) at TIMEOUT.
func (s *Service) runScript(ctx context.Context, gw string, opts map[string]string, phone, text string) error {
	fail := func(reason string, cause error) error {
		s.log.Warn().Str("smsgateway", gw).Str("result", "failed").AnErr("error", cause).Msg("sms not sent: " + reason)
		return sendErr(fmt.Sprintf("The SMS could not be sent through %s: %s.", gw, reason), cause)
	}
	if s.scripts == "" {
		return sendErr(ErrScriptsDisabled.Text, ErrScriptsDisabled)
	}
	path, err := s.scriptPath(opts["script"], true)
	if err != nil {
		return fail("the script is missing, not executable or outside the script directory", err)
	}
	secs, err := parseTimeout(opts["TIMEOUT"], defaultScriptTimeout)
	if err != nil {
		return fail("the option TIMEOUT is invalid", nil)
	}
	timeout := time.Duration(secs * float64(time.Second))
	background := strings.EqualFold(strings.TrimSpace(opts["background"]), "background")

	parent := ctx
	if background {
		// The request ends before the program: only the timeout stops it.
		parent = context.WithoutCancel(ctx)
	}
	runCtx, cancel := context.WithTimeout(parent, timeout)
	cmd := exec.CommandContext(runCtx, path, phone, text)
	cmd.Env = scriptEnv
	cmd.Dir = filepath.Dir(path)
	cmd.WaitDelay = time.Second
	KillGroup(cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		return fail("the script could not be started", err)
	}
	finish := func() error {
		defer cancel()
		err := cmd.Wait()
		ev := s.log.Debug()
		if err != nil {
			ev = s.log.Warn()
		}
		ev.Str("smsgateway", gw).Bool("background", background).AnErr("error", err).
			Int64("duration_ms", time.Since(start).Milliseconds()).Msg("sms script finished")
		return err
	}
	if background {
		go func() { _ = finish() }()
		return nil
	}
	err = finish()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return fail("the script did not finish in time", err)
	case ctx.Err() != nil:
		return fail("the request was cancelled", err)
	case errors.As(err, &ee):
		return fail(fmt.Sprintf("the script failed with exit status %d", ee.ExitCode()), nil)
	default:
		return fail("the script failed", err)
	}
}
