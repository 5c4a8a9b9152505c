package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// keySize is the HOTP key length: 20 bytes, SHA-1's block of entropy.
const keySize = 20

// firstUID is the uid of user 0 in the passwd file (user i gets
// firstUID+i, counting from 1).
const firstUID = 10000

// benchUser is one user with its token. Counter is the next HOTP counter
// the driver will use; only the goroutine that owns the user touches it
// during the load.
type benchUser struct {
	Login   string
	Serial  string
	UID     int
	Key     []byte
	Counter uint64

	gen   *hotpGen // built lazily by the owning goroutine
	wrong string   // mode wrong: an OTP outside the server's window
}

// String keeps the key out of any accidental print.
func (u *benchUser) String() string { return u.Login + "/" + u.Serial }

// userNames returns user i's login and serial (i counts from 1).
func userNames(prefix string, i int) (login, serial string) {
	n := fmt.Sprintf("%04d", i)
	return prefix + "user" + n, prefix + n
}

// newUsers returns n users with fresh random keys read from rnd.
func newUsers(prefix string, n int, rnd io.Reader) ([]*benchUser, error) {
	users := make([]*benchUser, n)
	for i := range users {
		login, serial := userNames(prefix, i+1)
		key := make([]byte, keySize)
		if _, err := io.ReadFull(rnd, key); err != nil {
			return nil, fmt.Errorf("random key: %w", err)
		}
		users[i] = &benchUser{Login: login, Serial: serial, UID: firstUID + i + 1, Key: key}
	}
	return users, nil
}

// passwdLine is the user's line in passwd format; the password field is
// "x", so the server never checks a password from this file.
func passwdLine(u *benchUser) string {
	uid := strconv.Itoa(u.UID)
	return u.Login + ":x:" + uid + ":" + uid + ":Bench User,,,:/home/b:/bin/false"
}

// passwdFile is the file name inside the passwd directory.
const passwdFile = "passwd"

// writePasswd writes the users' passwd file into dir (a new temporary
// directory when dir is empty) and returns its absolute path. The file is
// replaced atomically, since the server may reload it at any moment. Dir
// and file are world-readable so a server running as another user can
// read them (they hold no secrets). The directory is kept: the server
// reads the file for as long as the resolver exists.
func writePasswd(dir string, users []*benchUser) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "authbench-")
		if err != nil {
			return "", fmt.Errorf("passwd directory: %w", err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return "", fmt.Errorf("passwd directory: %w", err)
		}
		dir = d
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("passwd directory: %w", err)
	}
	path := filepath.Join(dir, passwdFile)
	err = writeAtomic(path, 0o644, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		for _, u := range users {
			bw.WriteString(passwdLine(u))
			bw.WriteByte('\n')
		}
		return bw.Flush()
	})
	if err != nil {
		return "", fmt.Errorf("passwd file: %w", err)
	}
	return path, nil
}

// writeAtomic writes path through a temporary file in the same directory
// and a rename, with the given mode.
func writeAtomic(path string, mode os.FileMode, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename this finds nothing
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// stateVersion is the schema version of the state file.
const stateVersion = 1

// state is what -state keeps between runs: the users, their token keys
// and the next counters. It holds secrets, so it is written 0600.
type state struct {
	Version int         `json:"version"`
	Realm   string      `json:"realm"`
	Prefix  string      `json:"prefix"`
	PIN     bool        `json:"pin"` // the tokens were enrolled with a PIN
	Users   []stateUser `json:"users"`
}

type stateUser struct {
	Login   string `json:"login"`
	Serial  string `json:"serial"`
	UID     int    `json:"uid"`
	Key     string `json:"key"` // hex
	Counter uint64 `json:"counter"`
}

func newState(realm, prefix string, pin bool, users []*benchUser) *state {
	st := &state{Version: stateVersion, Realm: realm, Prefix: prefix, PIN: pin, Users: make([]stateUser, len(users))}
	for i, u := range users {
		st.Users[i] = stateUser{Login: u.Login, Serial: u.Serial, UID: u.UID, Key: hex.EncodeToString(u.Key), Counter: u.Counter}
	}
	return st
}

// saveState writes st to path (mode 0600, atomically).
func saveState(path string, st *state) error {
	err := writeAtomic(path, 0o600, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(st)
	})
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// loadState reads a state file and rebuilds its users.
func loadState(path string) (*state, []*benchUser, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("state file: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, fmt.Errorf("state file %s: not a state file: %w", path, err)
	}
	if st.Version != stateVersion {
		return nil, nil, fmt.Errorf("state file %s: version %d, want %d", path, st.Version, stateVersion)
	}
	if len(st.Users) == 0 {
		return nil, nil, fmt.Errorf("state file %s: no users", path)
	}
	users := make([]*benchUser, len(st.Users))
	for i, su := range st.Users {
		key, err := hex.DecodeString(su.Key)
		if err != nil || len(key) == 0 || su.Login == "" {
			return nil, nil, fmt.Errorf("state file %s: user %d is damaged", path, i+1)
		}
		users[i] = &benchUser{Login: su.Login, Serial: su.Serial, UID: su.UID, Key: key, Counter: su.Counter}
	}
	return &st, users, nil
}

// resolverName is the passwd resolver the setup creates.
func resolverName(prefix string) string { return prefix + "_passwd" }

// wrongMaxFail is the fail counter limit the tokens get in mode wrong (the
// server's largest).
const wrongMaxFail = 1000000

// policyName is the authentication policy that sets otppin for the realm.
func policyName(prefix string) string { return prefix + "_otppin" }

// setupResult describes a finished setup for the report.
type setupResult struct {
	passwdPath string
	resolver   string
	took       time.Duration
}

// setup logs in as the admin, writes the passwd file, creates the
// resolver and the realm, then enrols one HOTP token per user with a few
// parallel workers. Every token gets pin as its PIN ("" for none), also
// when it exists already: then it gets the new key and counter 0.
func (b *bench) setup(ctx context.Context, users []*benchUser, pin string) (*setupResult, error) {
	start := time.Now()
	api := &apiClient{base: b.base, hc: b.hc, timeout: b.cfg.timeout}
	env, err := api.post(ctx, "/auth", url.Values{"username": {b.cfg.admin}, "password": {b.cfg.password}})
	if err != nil {
		return nil, fmt.Errorf("admin login as %q: %w", b.cfg.admin, err)
	}
	var login struct {
		Token string `json:"token"`
		Role  string `json:"role"`
	}
	if err := json.Unmarshal(env.Result.Value, &login); err != nil || login.Token == "" {
		return nil, fmt.Errorf("admin login as %q: the answer has no token", b.cfg.admin)
	}
	if login.Role != "admin" {
		return nil, fmt.Errorf("admin login as %q: role %q, need admin", b.cfg.admin, login.Role)
	}
	api.jwt = login.Token

	path, err := writePasswd(b.cfg.passwdDir, users)
	if err != nil {
		return nil, err
	}
	res := resolverName(b.cfg.prefix)
	if _, err := api.post(ctx, "/resolver/"+url.PathEscape(res), url.Values{"type": {"passwdresolver"}, "fileName": {path}}); err != nil {
		return nil, fmt.Errorf("creating resolver %s (file %s): %w", res, path, err)
	}
	env, err = api.post(ctx, "/realm/"+url.PathEscape(b.cfg.realm), url.Values{"resolvers": {res}})
	if err != nil {
		return nil, fmt.Errorf("creating realm %s: %w", b.cfg.realm, err)
	}
	var realm struct {
		Failed []string `json:"failed"`
	}
	if err := json.Unmarshal(env.Result.Value, &realm); err == nil && len(realm.Failed) > 0 {
		return nil, fmt.Errorf("creating realm %s: resolver %s failed", b.cfg.realm, res)
	}

	// Without a PIN the realm gets otppin=none (the PIN part must be
	// empty); with one, the default tokenpin, said explicitly so that a
	// setup with a PIN after one without undoes it.
	otppin := "otppin=tokenpin"
	if pin == "" {
		otppin = "otppin=none"
	}
	pol := policyName(b.cfg.prefix)
	if _, err := api.post(ctx, "/policy/"+url.PathEscape(pol), url.Values{"scope": {"authentication"}, "action": {otppin},
		"realm": {b.cfg.realm}, "active": {"true"}}); err != nil {
		return nil, fmt.Errorf("creating policy %s (%s): %w", pol, otppin, err)
	}

	err = forEach(ctx, b.cfg.setupWorkers, len(users), func(ctx context.Context, i int) error {
		u := users[i]
		form := url.Values{
			"type":        {"hotp"},
			"otpkey":      {hex.EncodeToString(u.Key)},
			"serial":      {u.Serial},
			"user":        {u.Login},
			"realm":       {b.cfg.realm},
			"description": {"authbench"},
			// Always sent: re-enrolling an existing serial keeps its PIN
			// unless "pin" is given, and an empty one clears it.
			"pin": {pin},
		}
		env, err := api.post(ctx, "/token/init", form)
		if err != nil {
			return fmt.Errorf("enrolling token %s for %s: %w", u.Serial, u.Login, err)
		}
		if string(env.Result.Value) != "true" {
			return fmt.Errorf("enrolling token %s for %s: result.value is %s", u.Serial, u.Login, snippet(env.Result.Value))
		}
		u.Counter = 0 // a new key starts at counter 0
		if b.cfg.mode == modeWrong {
			// Wrong OTPs would lock a token after maxfail (10) tries,
			// and a locked token answers without checking its PIN: the
			// load would measure the lock, not the PIN check.
			env, err := api.post(ctx, "/token/set", url.Values{"serial": {u.Serial}, "max_failcount": {strconv.Itoa(wrongMaxFail)}})
			if err != nil {
				return fmt.Errorf("raising max_failcount of %s: %w", u.Serial, err)
			}
			if string(env.Result.Value) != "1" {
				return fmt.Errorf("raising max_failcount of %s: result.value is %s", u.Serial, snippet(env.Result.Value))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &setupResult{passwdPath: path, resolver: res, took: time.Since(start)}, nil
}

// forEach calls fn for 0..n-1 from workers goroutines and returns the
// first error (the others stop taking work), or ctx's error.
func forEach(ctx context.Context, workers, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
