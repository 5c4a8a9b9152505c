// Package passwd is the passwd-file user store ("passwdresolver"): users
// come from a file in /etc/passwd format, which the store keeps in memory
// (the file's text and sorted indexes of its logins, gecos, e-mail
// addresses and uids: about the file's size plus 45 bytes per user) and
// reloads when it changes. The first load starts when the store is built
// (resolver.Loader: readiness waits for it); reloads of big files run in
// the background while lookups answer from the last copy. Exact and
// prefix searches come from the indexes; searches page (resolver.Pager).
// Passwords are checked against the second field when it holds a
// sha256-crypt, sha512-crypt or bcrypt hash.
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
	"math"
	"runtime"
	"strconv"
	"strings"
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
			{Name: ParamMaxFileSize, Type: resolver.Int, Description: "The largest file loaded, in bytes (default 268435456, 256 MiB)."},
		},
		Validate: func(cfg resolver.Config) error {
			path, err := fileName(cfg)
			if err != nil {
				return err
			}
			limit, err := maxFileSize(cfg)
			if err != nil {
				return err
			}
			if err := pol.validate(path); err != nil {
				return err
			}
			return pol.checkSize(path, limit)
		},
		New: func(ctx context.Context, cfg resolver.Config, env resolver.Env) (resolver.Resolver, error) {
			path, err := fileName(cfg)
			if err != nil {
				return nil, err
			}
			if err := pol.lexical(path); err != nil {
				return nil, configErr(describe(err, path))
			}
			limit, err := maxFileSize(cfg)
			if err != nil {
				return nil, err
			}
			st, err := newStore(pol, path, limit, env)
			if err != nil {
				return nil, err
			}
			return st, nil
		},
		Editable:     func(resolver.Config) bool { return false },
		CacheTimeout: func(resolver.Config) time.Duration { return 0 },
		Preload:      true,
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

// ParamMaxFileSize is the largest file the store loads, in bytes
// (default DefaultMaxFileSize, at most 4 GiB - 1). A larger file is a
// configuration error when the resolver is saved or built, and a load
// failure (the last good copy is served) when the file grows past it.
const ParamMaxFileSize = "MaxFileSize"

// maxFileSize reads ParamMaxFileSize.
func maxFileSize(cfg resolver.Config) (int64, error) {
	v := cfg[ParamMaxFileSize]
	if v == "" {
		return DefaultMaxFileSize, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > maxMaxFileSize {
		return 0, configErr(fmt.Sprintf("%s must be a number of bytes from 1 to %d.", ParamMaxFileSize, int64(maxMaxFileSize)))
	}
	return n, nil
}

// checkSize refuses an existing file over limit (a missing or unreadable
// file is left to the loads, which report it).
func (p policy) checkSize(path string, limit int64) error {
	if size, err := p.size(path); err == nil && size > limit {
		return configErr(describe(&tooLargeError{size, limit}, path))
	}
	return nil
}

// Loads of files at least this large run in the background after a change
// (lookups go on from the last copy); smaller ones run in the call that
// notices the change, which then answers from the new copy.
const backgroundLoadSize = 1 << 20

// progressSize: loads of files at least this large log their progress.
const progressSize = 32 << 20

// store is one configured passwd file. The loaded file is an immutable
// snapshot behind an atomic pointer. The first load starts when the store
// is built and lookups wait for it; after that, a call that finds the last
// check older than checkInterval looks at the file and, when it changed,
// loads it again and swaps the snapshot, in the background for big files.
// Readers never wait for a reload once a first copy is loaded.
type store struct {
	pol   policy
	path  string
	limit int64
	log   zerolog.Logger
	now   func() time.Time

	snap      atomic.Pointer[snapshot]
	lastCheck atomic.Int64 // unix nanoseconds of the last look at the file
	closed    atomic.Bool
	loading   atomic.Bool   // the first load runs
	first     chan struct{} // closed when the first load is over
	bg        context.Context
	stop      context.CancelFunc
	// backgroundSize is backgroundLoadSize (tests lower it).
	backgroundSize int64

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
	_ resolver.Pager    = (*store)(nil)
	_ resolver.Loader   = (*store)(nil)
)

// newStore refuses a file over limit and starts the first load in the
// background.
func newStore(pol policy, path string, limit int64, env resolver.Env) (*store, error) {
	if err := pol.checkSize(path, limit); err != nil {
		return nil, err
	}
	s := &store{pol: pol, path: path, limit: limit, log: env.Log, now: env.Now, sem: make(chan struct{}, 1),
		first: make(chan struct{}), backgroundSize: backgroundLoadSize}
	if s.now == nil {
		s.now = time.Now
	}
	s.bg, s.stop = context.WithCancel(context.Background())
	s.sem <- struct{}{}
	s.lastCheck.Store(s.now().UnixNano())
	s.loading.Store(true)
	hold := beforeFirstLoad
	go func() {
		if hold != nil {
			hold()
		}
		// A failure is logged and retried on later calls: the file may
		// appear after the store is configured.
		_ = s.load(s.bg, false)
		s.loading.Store(false)
		// sem is released before first is closed: a call that has
		// waited for the first load and finds the file changed must be
		// able to look at it, not take the load's own hold on sem for
		// another caller's.
		<-s.sem
		close(s.first)
	}()
	return s, nil
}

var errClosed = fmt.Errorf("passwd: store closed: %w", resolver.ErrUnavailable)

// beforeFirstLoad, when set (by tests, before building stores), runs
// before each store's first load.
var beforeFirstLoad func()

// Loading reports whether the first load is still running.
func (s *store) Loading() bool { return s.loading.Load() }

// current returns the snapshot to answer from: it waits for the first
// load, and looks at the file when the last look is older than
// checkInterval.
func (s *store) current(ctx context.Context) (*snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	select {
	case <-s.first:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	now := s.now().UnixNano()
	last := s.lastCheck.Load()
	if d := now - last; d >= int64(checkInterval) || d < 0 {
		select {
		case s.sem <- struct{}{}:
			switch {
			case !s.lastCheck.CompareAndSwap(last, now):
				<-s.sem
			case s.big():
				go func() {
					defer func() { <-s.sem }()
					_ = s.load(s.bg, false)
				}()
			default:
				_ = s.load(ctx, false)
				<-s.sem
			}
		default: // another call is looking; answer from the current copy
		}
	}
	if snap := s.snap.Load(); snap != nil {
		return snap, nil
	}
	// Nothing loaded: wait for a load in progress, or try once more.
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

// big reports whether a reload should run in the background: the loaded
// copy or the file is at least backgroundSize.
func (s *store) big() bool {
	if old := s.snap.Load(); old != nil && old.stat.size >= s.backgroundSize {
		return true
	}
	size, err := s.pol.size(s.path)
	return err == nil && size >= s.backgroundSize
}

// load reads the file when it differs from the snapshot (or always, with
// force) and installs the result. The caller holds sem. A failure keeps
// the snapshot and is logged once per distinct failure.
func (s *store) load(ctx context.Context, force bool) error {
	old := s.snap.Load()
	start := time.Now()
	var report func(done, total int64)
	announced := false
	report = func(done, total int64) {
		if total < progressSize {
			return
		}
		if !announced {
			announced = true
			s.log.Info().Str("file", s.path).Int64("bytes", total).Msg("passwd file loading")
			return
		}
		s.log.Info().Str("file", s.path).Int("percent", int(done*100/total)).Msg("passwd file loading")
	}
	snap, err := s.pol.read(ctx, s.path, s.limit, func(fi fileStat) bool {
		return !force && old != nil && old.stat.same(fi)
	}, report)
	if err != nil {
		if ctx.Err() != nil {
			return err // the caller gave up; not the file's fault
		}
		if msg := err.Error(); msg != s.lastFail {
			s.lastFail = msg
			ev := s.log.Error().Str("file", s.path).Err(err)
			if old != nil {
				ev.Int("users", old.count()).Msg("passwd file cannot be loaded; serving the last good copy")
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
	if s.closed.Load() {
		return errClosed
	}
	s.snap.Store(snap)
	ev := s.log.Info().Str("file", s.path).Int("users", snap.count()).Int64("bytes", snap.stat.size).
		Int64("took_ms", time.Since(start).Milliseconds())
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
	defer runtime.KeepAlive(snap) // its text may be outside the heap
	id, ok := snap.byLoginExact(login)
	if !ok {
		return "", resolver.ErrNoUser
	}
	return strings.Clone(snap.uid(id)), nil
}

// User returns the info of the line with uid.
func (s *store) User(ctx context.Context, uid string) (resolver.Info, error) {
	snap, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(snap)
	id, ok := snap.byUIDExact(uid)
	if !ok {
		return nil, resolver.ErrNoUser
	}
	e := snap.entry(id)
	return e.info(), nil
}

// Search lists the users matching every filter entry, in file order.
func (s *store) Search(ctx context.Context, filter map[string]string) ([]resolver.Info, error) {
	p, err := s.SearchPage(ctx, filter, 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	return p.Users, nil
}

// SearchPage lists one page of Search's users, in file order: from the
// index of the most selective exact or prefix condition (username,
// description, email, userid), else by a walk over the entries that stops
// once the page is full.
func (s *store) SearchPage(ctx context.Context, filter map[string]string, offset, limit int) (resolver.Page, error) {
	m, err := compileFilter(filter)
	if err != nil {
		return resolver.Page{}, err
	}
	snap, err := s.current(ctx)
	if err != nil {
		return resolver.Page{}, err
	}
	defer runtime.KeepAlive(snap)
	return m.page(ctx, snap, offset, limit)
}

// CheckPassword verifies password against uid's hash field. Unknown users,
// empty passwords and unsupported hashes cost one dummy hash, so the time
// does not tell them apart from a wrong password.
func (s *store) CheckPassword(ctx context.Context, uid, password string) (bool, error) {
	snap, err := s.current(ctx)
	if err != nil {
		return false, err
	}
	defer runtime.KeepAlive(snap)
	hash := ""
	if id, ok := snap.byUIDExact(uid); ok {
		hash = snap.field(id, 1)
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
	return true, "The file contains " + strconv.Itoa(s.snap.Load().count()) + " users."
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
	s.stop()
	s.snap.Store(nil)
	return nil
}
