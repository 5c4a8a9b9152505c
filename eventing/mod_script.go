package eventing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/notify"
)

// The Script module runs the executables of the script directory
// (Config.ScriptDir): each executable regular file directly in it is one
// action. A script gets only the arguments its definition's flags ask for
// (--serial, --user, --realm, --logged_in_user, --logged_in_role), never
// through a shell, with an empty environment besides PATH, no input and
// its output discarded: the request's data (and so its secrets) never
// reaches it any other way.
//
// Option background is "background" (the default: the script is started
// and the operation goes on; the script is waited for, so that it leaves no
// zombie, and killed at the timeout) or "wait" (the handler waits for the
// script, at most the timeout). A script that cannot be started, exits
// non-zero or runs out of time fails the handler: with wait and raise_error
// the failure aborts the operation (*Abort), otherwise it is audited and
// the operation goes on (or stops, with abort_on_error). The operation's
// error then says only that the script failed: its output, exit status and
// path stay in the log.
//
// On Unix the timeout kills the script's process group (notify.KillGroup),
// programs it started included; elsewhere only the script itself.
type scriptModule struct {
	s *Service
	// timeout bounds one run of a script (wait and background alike).
	timeout time.Duration
}

var _ Module = (*scriptModule)(nil)

// scriptTimeout is how long a script may run.
const scriptTimeout = 60 * time.Second

// scriptEnv is the whole environment of a script: it must not inherit the
// server's, which may hold keys or passwords.
var scriptEnv = []string{"PATH=/usr/bin:/bin"}

// The values of the background option. privacyIDEA stores its GUI's
// labels; both forms are understood.
const (
	scriptBackground = "background"
	scriptWait       = "wait"
	piScriptWait     = "Wait for script to finish"
	piScriptBg       = "Run in background"
)

// errScriptFailed is the operation's error when a script with raise_error
// failed; the cause (kept hidden) says why.
var errScriptFailed = apierr.New(apierr.Server, "Error during execution of the script.")

func newScript(s *Service) Module { return &scriptModule{s: s, timeout: scriptTimeout} }

func (m *scriptModule) Name() string        { return "Script" }
func (m *scriptModule) Positions() []string { return []string{Post, Pre} }
func (m *scriptModule) DefaultAbort() bool  { return false }

// scriptDirError is the answer when the script directory cannot be read.
func scriptDirError(dir string) error {
	if dir == "" {
		dir = "(no script directory is configured)"
	}
	return apierr.New(apierr.ConfigAdmin, "Unable to open script directory: "+dir)
}

// dir returns the script directory, absolute and with its symbolic links
// resolved, after checking that it can be listed.
func (m *scriptModule) dir() (string, error) {
	d := m.s.cfg.ScriptDir
	if d == "" {
		return "", scriptDirError(d)
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", scriptDirError(d)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", scriptDirError(d)
	}
	f, err := os.Open(real)
	if err != nil {
		return "", scriptDirError(d)
	}
	defer f.Close()
	if _, err := f.ReadDir(1); err != nil && !errors.Is(err, io.EOF) {
		return "", scriptDirError(d)
	}
	return real, nil
}

// Actions lists one action per executable regular file of the script
// directory (a symbolic link counts when it points to one inside the
// directory).
func (m *scriptModule) Actions(ctx context.Context) (map[string]map[string]OptionSpec, error) {
	dir, err := m.dir()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, scriptDirError(m.s.cfg.ScriptDir)
	}
	out := map[string]map[string]OptionSpec{}
	for _, e := range entries {
		if _, err := scriptPath(dir, e.Name()); err == nil {
			out[e.Name()] = scriptOptions()
		}
	}
	return out, nil
}

// scriptOptions are the options of every script action.
func scriptOptions() map[string]OptionSpec {
	flag := func(desc string) OptionSpec { return OptionSpec{Type: "bool", Description: desc} }
	return map[string]OptionSpec{
		"background": {Type: "str", Required: true, Value: []string{scriptBackground, scriptWait},
			Description: "Run the script in the background (the request goes on at once) or wait for it to finish (the request waits)."},
		"raise_error": {Type: "bool", VisibleIf: "background", VisibleValue: scriptWait,
			Description: "When the script fails, the request fails."},
		"sync_to_database": {Type: "bool",
			Description: "Commit the request's changes before the script runs."},
		"serial":         flag("Add '--serial <serial number>' as script parameter."),
		"user":           flag("Add '--user <username>' as script parameter."),
		"realm":          flag("Add '--realm <realm>' as script parameter."),
		"logged_in_user": flag("Add the logged-in user as script parameter: '--logged_in_user <user>@<realm>'."),
		"logged_in_role": flag("Add the role (admin or user) of the logged-in user as script parameter: '--logged_in_role <role>'."),
	}
}

// Check refuses an action that is not an executable file of the script
// directory, and an unknown background value.
func (m *scriptModule) Check(ctx context.Context, d Definition) error {
	dir, err := m.dir()
	if err != nil {
		return err
	}
	if _, err := scriptPath(dir, d.Action); err != nil {
		return err
	}
	if _, ok := scriptWaits(d.Options["background"]); !ok {
		return paramErr("The option background must be 'background' or 'wait'.")
	}
	return nil
}

// scriptWaits reads the background option: whether the handler waits for
// the script, and whether the value is known ("" is the default,
// background).
func scriptWaits(v string) (wait, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", scriptBackground, strings.ToLower(piScriptBg):
		return false, true
	case scriptWait, strings.ToLower(piScriptWait):
		return true, true
	}
	return false, false
}

// scriptPath returns the file that action name runs: name must be a plain
// file name of directory dir (absolute, symbolic links resolved), and the
// file, after resolving symbolic links, an executable regular file inside
// dir.
func scriptPath(dir, name string) (string, error) {
	if name == "" {
		return "", apierr.MissingParameter("action")
	}
	if name == "." || name == ".." || strings.ContainsAny(name, `/\`) || filepath.IsAbs(name) ||
		filepath.Base(name) != name || strings.IndexFunc(name, unicode.IsControl) >= 0 || filepath.VolumeName(name) != "" {
		return "", paramErr("The script name must be the name of a file in the script directory.")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Lstat(p); err != nil {
		return "", paramErr("The script " + name + " does not exist in the script directory.")
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", paramErr("The script " + name + " does not exist in the script directory.")
	}
	if !inDir(dir, real) {
		return "", paramErr("The script " + name + " is outside the script directory.")
	}
	st, err := os.Stat(real)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", paramErr("The script " + name + " is not an executable file.")
	}
	return real, nil
}

// inDir reports whether the clean absolute path p lies inside directory
// dir (not dir itself).
func inDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !filepath.IsAbs(rel) &&
		!strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Do runs the script.
func (m *scriptModule) Do(ctx context.Context, r *Run) error {
	opts := r.Def.Options
	name := r.Def.Action
	wait, _ := scriptWaits(opts["background"])
	raise := wait && IsTrue(opts["raise_error"])
	// sync_to_database is accepted and does nothing: post handlers run
	// after the operation committed, pre handlers before it began, so
	// the script always sees the stored state.
	dir, err := m.dir()
	if err != nil {
		return m.failed(r, raise, "the script directory cannot be read", err)
	}
	path, err := scriptPath(dir, name)
	if err != nil {
		return m.failed(r, raise, "the script is missing or not executable", err)
	}
	args := scriptArgs(ctx, r)
	if !wait {
		// The operation does not wait: the script runs on the bounded
		// background queue (its entry is written when it is done), and
		// only the timeout stops it.
		done := r.Detach(ctx)
		if err := m.s.Background("script "+name, func(bctx context.Context) {
			if reason, cause := m.exec(bctx, r, path, dir, args, false); reason != "" {
				done(m.failed(r, false, reason, cause))
				return
			}
			done(nil)
		}); err != nil {
			done(err)
		}
		return nil
	}
	if reason, cause := m.exec(ctx, r, path, dir, args, true); reason != "" {
		return m.failed(r, raise, reason, cause)
	}
	return nil
}

// exec runs the script at path and waits for it (at most the timeout).
// It returns "" when the script exited 0, else the reason it failed and
// its cause.
func (m *scriptModule) exec(ctx context.Context, r *Run, path, dir string, args []string, wait bool) (string, error) {
	name := r.Def.Action
	runCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, path, args...)
	cmd.Env = slices.Clone(scriptEnv)
	cmd.Dir = dir
	// The timeout kills the script's whole process group: programs it
	// started do not outlive it.
	notify.KillGroup(cmd)
	// Stdin, Stdout and Stderr stay nil: the null device. Nothing of the
	// request reaches the script but its arguments, and its output
	// (which may echo anything) is never logged or returned.
	cmd.WaitDelay = time.Second
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return "the script could not be started", err
	}
	err := cmd.Wait()
	ev := m.s.cfg.Log.Debug()
	if err != nil {
		ev = m.s.cfg.Log.Warn()
	}
	ev.Str("component", "eventing").Str("handler", r.Def.Name).Str("action", name).Bool("background", !wait).
		AnErr("error", err).Int64("duration_ms", time.Since(started).Milliseconds()).Msg("event handler script finished")
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "", nil
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return "the script did not finish in time", err
	case ctx.Err() != nil:
		return "the request was cancelled", err
	case errors.As(err, &ee):
		return fmt.Sprintf("the script failed with exit status %d", ee.ExitCode()), nil
	default:
		return "the script failed", err
	}
}

// failed is the handler's error for a script that failed for reason: an
// *Abort with raise_error, else a plain failure. Either says only that the
// script failed; reason and cause are the hidden cause (for the log).
func (m *scriptModule) failed(r *Run, raise bool, reason string, cause error) error {
	detail := fmt.Errorf("script %s: %s", r.Def.Action, reason)
	if cause != nil {
		detail = fmt.Errorf("script %s: %s: %w", r.Def.Action, reason, cause)
	}
	e := errScriptFailed.Wrap(detail)
	m.s.cfg.Log.Warn().Str("component", "eventing").Str("handler", r.Def.Name).Str("action", r.Def.Action).
		Bool("raise_error", raise).AnErr("error", detail).Msg("event handler script failed")
	if raise {
		return &Abort{Err: e}
	}
	return e
}

// scriptArgs are the arguments the definition's flags ask for, each
// missing value "none".
func scriptArgs(ctx context.Context, r *Run) []string {
	opts := r.Def.Options
	orNone := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	var args []string
	if IsTrue(opts["serial"]) {
		args = append(args, "--serial", orNone(scriptSerial(r)))
	}
	if IsTrue(opts["user"]) || IsTrue(opts["realm"]) {
		u := r.User(ctx)
		if IsTrue(opts["user"]) {
			args = append(args, "--user", orNone(u.Login))
		}
		if IsTrue(opts["realm"]) {
			args = append(args, "--realm", orNone(u.Realm))
		}
	}
	name, realm, role := loggedIn(r.Call.Caller)
	if IsTrue(opts["logged_in_user"]) {
		args = append(args, "--logged_in_user", orNone(name)+"@"+orNone(realm))
	}
	if IsTrue(opts["logged_in_role"]) {
		args = append(args, "--logged_in_role", orNone(role))
	}
	return args
}

// scriptSerial is the call's token serial: the operation's, the request's,
// the answer's detail, or the audit entry's.
func scriptSerial(r *Run) string {
	c := r.Call
	if c.Serial != "" {
		return c.Serial
	}
	if s := c.Param("serial"); s != "" {
		return s
	}
	if c.Response != nil {
		if s, ok := c.Response.Detail["serial"].(string); ok && s != "" {
			return s
		}
	}
	return c.Entry.Serial
}

// loggedIn is who is logged in as privacyIDEA names it: an administrator
// or a user with its realm and role. A trusted local caller (a Go program)
// counts as an administrator; a caller without credentials is nobody
// (empty values).
func loggedIn(c caller.Caller) (name, realm, role string) {
	switch c.Role {
	case caller.Admin:
		return c.Name, c.Realm, "admin"
	case caller.User:
		return c.Name, c.Realm, "user"
	case caller.Local:
		return c.Name, c.Realm, "admin"
	}
	return "", "", ""
}
