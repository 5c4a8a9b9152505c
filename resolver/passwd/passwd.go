// Package passwd is the passwd-file user store ("passwdresolver"): users
// come from a file in /etc/passwd format, which the store keeps in memory
// and reloads when it changes. Passwords are checked against the second
// field when it holds a sha256-crypt, sha512-crypt or bcrypt hash.
//
// The file name is set by an administrator, so the store refuses relative
// paths, anything that is not a regular file and the kernel's pseudo file
// systems (/proc, /sys, /dev); TypeConfined further confines it to the
// directory trees the operator names and keeps the server's data
// directory out of reach (shared/spec reliability A10, B7).
//
// Package passwd imports resolver, apierr and fileroot only; it never
// serves HTTP.
package passwd

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/resolver"
)

// TypeName is the type as the API writes it.
const TypeName = "passwdresolver"

// The spellings of the file parameter: Filename is the product
// description's, fileName and filename are privacyIDEA's (divergence 18).
// All three are read; when several are set they must agree.
const (
	ParamFilename      = "Filename"
	ParamFileNameCamel = "fileName"
	ParamFileNameLower = "filename"
)

var fileParams = []string{ParamFilename, ParamFileNameCamel, ParamFileNameLower}

// checkInterval is how often a call may look at the file for changes.
const checkInterval = time.Second

// Type returns the passwd store type without a directory restriction: any
// absolute path to a regular file outside /proc, /sys and /dev is allowed.
func Type() resolver.Type { return TypeWithRoot("") }

// TypeWithRoot returns the passwd store type confined to the directory
// tree root (TypeConfined with that one root); an empty root means no
// restriction.
func TypeWithRoot(root string) resolver.Type {
	var c Confinement
	if root != "" {
		c.Roots = []string{root}
	}
	return TypeConfined(c)
}

// Confinement says which files an administrator may name as a passwd
// file, so that a resolver cannot turn the server's keys or the system's
// secrets into a user list: the roots the file must lie beneath (none
// means anywhere) and the data directory whose files are never read (but
// for its files subfolder). See package fileroot for the rules.
type Confinement = fileroot.Confinement

// TypeConfined returns the passwd store type confined by c: a file that
// breaks a rule is refused when the configuration is saved and is never
// opened on a later (re)load either.
func TypeConfined(c Confinement) resolver.Type {
	pol := policy{files: c.Copy()}
	return resolver.Type{
		Name: TypeName,
		Params: []resolver.Param{
			{Name: ParamFilename, Type: resolver.String, Description: "The absolute path of the passwd file."},
			{Name: ParamFileNameCamel, Type: resolver.String, Description: "The absolute path of the passwd file (privacyIDEA spelling)."},
			{Name: ParamFileNameLower, Type: resolver.String, Description: "The absolute path of the passwd file (privacyIDEA spelling)."},
		},
		Validate: func(cfg resolver.Config) error {
			path, err := fileName(cfg)
			if err != nil {
				return err
			}
			return pol.validate(path)
		},
		New: func(ctx context.Context, cfg resolver.Config, env resolver.Env) (resolver.Resolver, error) {
			path, err := fileName(cfg)
			if err != nil {
				return nil, err
			}
			if err := pol.lexical(path); err != nil {
				return nil, configErr(describe(err, path))
			}
			return newStore(ctx, pol, path, env), nil
		},
		Editable:     func(resolver.Config) bool { return false },
		CacheTimeout: func(resolver.Config) time.Duration { return 0 },
	}
}

// configErr is a resolver error with a specific text that still matches
// resolver.ErrConfig with errors.Is.
func configErr(text string) error {
	return apierr.New(apierr.Resolver, text).Wrap(resolver.ErrConfig)
}

// fileName returns the configured path under any of its spellings.
func fileName(cfg resolver.Config) (string, error) {
	var name, path string
	for _, k := range fileParams {
		v := cfg[k]
		if v == "" {
			continue
		}
		if path != "" && v != path {
			return "", configErr(fmt.Sprintf("The parameters %s and %s name different files; set only one.", name, k))
		}
		name, path = k, v
	}
	if path == "" {
		return "", configErr("Missing parameter: " + ParamFilename)
	}
	return path, nil
}

// store is one configured passwd file. The parsed file is an immutable
// snapshot behind an atomic pointer; a call that finds the last check older
// than checkInterval looks at the file and, when it changed, parses it and
// swaps the snapshot. Readers never wait for a reload once a first copy
// is loaded.
type store struct {
	pol  policy
	path string
	log  zerolog.Logger
	now  func() time.Time

	snap      atomic.Pointer[snapshot]
	lastCheck atomic.Int64 // unix nanoseconds of the last look at the file
	closed    atomic.Bool

	// sem serialises loads (a channel so waiting honours ctx).
	sem chan struct{}
	// lastFail is the text of the last logged load failure (under sem),
	// so a missing file is logged once rather than every second.
	lastFail string
}

var (
	_ resolver.Resolver = (*store)(nil)
	_ resolver.Tester   = (*store)(nil)
	_ resolver.Fielder  = (*store)(nil)
)

func newStore(ctx context.Context, pol policy, path string, env resolver.Env) *store {
	s := &store{pol: pol, path: path, log: env.Log, now: env.Now, sem: make(chan struct{}, 1)}
	if s.now == nil {
		s.now = time.Now
	}
	s.sem <- struct{}{}
	s.lastCheck.Store(s.now().UnixNano())
	// A failure is logged and retried on later calls: the file may appear
	// after the store is configured.
	_ = s.load(ctx, false)
	<-s.sem
	return s
}

var errClosed = fmt.Errorf("passwd: store closed: %w", resolver.ErrUnavailable)

// current returns the snapshot to answer from, first looking at the file
// when the last look is older than checkInterval.
func (s *store) current(ctx context.Context) (*snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	now := s.now().UnixNano()
	last := s.lastCheck.Load()
	if d := now - last; d >= int64(checkInterval) || d < 0 {
		select {
		case s.sem <- struct{}{}:
			if s.lastCheck.CompareAndSwap(last, now) {
				_ = s.load(ctx, false)
			}
			<-s.sem
		default: // another call is looking; answer from the current copy
		}
	}
	if snap := s.snap.Load(); snap != nil {
		return snap, nil
	}
	// Nothing loaded yet: wait for a load in progress, or try once more.
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.sem }()
	if snap := s.snap.Load(); snap != nil {
		return snap, nil
	}
	if err := s.load(ctx, false); err != nil {
		return nil, fmt.Errorf("passwd: %w: %w", resolver.ErrUnavailable, err)
	}
	return s.snap.Load(), nil
}

// load reads the file when it differs from the snapshot (or always, with
// force) and installs the result. The caller holds sem. A failure keeps
// the snapshot and is logged once per distinct failure.
func (s *store) load(ctx context.Context, force bool) error {
	old := s.snap.Load()
	snap, err := s.pol.read(ctx, s.path, func(fi fileStat) bool {
		return !force && old != nil && old.stat.same(fi)
	})
	if err != nil {
		if ctx.Err() != nil {
			return err // the caller gave up; not the file's fault
		}
		if msg := err.Error(); msg != s.lastFail {
			s.lastFail = msg
			ev := s.log.Error().Str("file", s.path).Err(err)
			if old != nil {
				ev.Int("users", len(old.users)).Msg("passwd file cannot be loaded; serving the last good copy")
			} else {
				ev.Msg("passwd file cannot be loaded; the store has no users until it can")
			}
		}
		return err
	}
	s.lastFail = ""
	if snap == nil { // unchanged
		return nil
	}
	s.snap.Store(snap)
	ev := s.log.Info().Str("file", s.path).Int("users", len(snap.users))
	if snap.skipped > 0 {
		ev.Int("skipped_lines", snap.skipped)
	}
	if snap.duplicates > 0 {
		ev.Int("duplicates", snap.duplicates)
	}
	ev.Msg("passwd file loaded")
	return nil
}

// UserID returns the uid field of login's line.
func (s *store) UserID(ctx context.Context, login string) (string, error) {
	snap, err := s.current(ctx)
	if err != nil {
		return "", err
	}
	e := snap.byLogin(login)
	if e == nil {
		return "", resolver.ErrNoUser
	}
	return e.uid, nil
}

// User returns the info of the line with uid.
func (s *store) User(ctx context.Context, uid string) (resolver.Info, error) {
	snap, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	e := snap.byUID(uid)
	if e == nil {
		return nil, resolver.ErrNoUser
	}
	return e.info(), nil
}

// Search lists the users matching every filter entry, in file order.
func (s *store) Search(ctx context.Context, filter map[string]string) ([]resolver.Info, error) {
	m, err := compileFilter(filter)
	if err != nil {
		return nil, err
	}
	snap, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	var out []resolver.Info
	for i := range snap.users {
		if i&4095 == 4095 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if e := &snap.users[i]; m.match(e) {
			out = append(out, e.info())
		}
	}
	return out, nil
}

// CheckPassword verifies password against uid's hash field. Unknown users,
// empty passwords and unsupported hashes cost one dummy hash, so the time
// does not tell them apart from a wrong password.
func (s *store) CheckPassword(ctx context.Context, uid, password string) (bool, error) {
	snap, err := s.current(ctx)
	if err != nil {
		return false, err
	}
	hash := ""
	if e := snap.byUID(uid); e != nil {
		hash = e.hash
	}
	return verify(hash, password), nil
}

// Test reads the file now (bypassing the change check) and reports how
// many users it holds: our divergence 19 (privacyIDEA always says false).
func (s *store) Test(ctx context.Context) (any, string) {
	if s.closed.Load() {
		return false, "The resolver is closed."
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return false, "The test was cancelled."
	}
	defer func() { <-s.sem }()
	s.lastCheck.Store(s.now().UnixNano())
	if err := s.load(ctx, true); err != nil {
		return false, describe(err, s.path)
	}
	return true, "The file contains " + strconv.Itoa(len(s.snap.Load().users)) + " users."
}

// Fields lists the Info keys the store can search by (it writes none).
// User fills givenname, surname, phone and mobile too.
func (s *store) Fields() []string {
	return []string{resolver.KeyUsername, resolver.KeyUserID, resolver.KeyDescription, resolver.KeyEmail}
}

// Close drops the loaded copy; later calls fail. It is idempotent.
func (s *store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.snap.Store(nil)
	return nil
}
