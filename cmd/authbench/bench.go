package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// bench is one run of the driver.
type bench struct {
	cfg  *config
	log  io.Writer // progress and warnings (stderr)
	hc   *http.Client
	base string // cfg.base as a string, no trailing slash
	// nodes are the base URLs the load spreads its checks over: base,
	// then -spread's.
	nodes []string

	loaded *state // with -skip-setup: the state file as read
}

func newBench(cfg *config, log io.Writer) *bench {
	b := &bench{
		cfg:  cfg,
		log:  log,
		hc:   newHTTPClient(max(cfg.clients, cfg.setupWorkers)),
		base: cfg.base.String(),
	}
	b.nodes = []string{b.base}
	for _, u := range cfg.spread {
		b.nodes = append(b.nodes, u.String())
	}
	return b
}

func (b *bench) close() { b.hc.CloseIdleConnections() }

// setupSummary is the -json answer of -setup-only.
type setupSummary struct {
	URL          string  `json:"url"`
	Realm        string  `json:"realm"`
	Resolver     string  `json:"resolver"`
	PasswdFile   string  `json:"passwd_file"`
	Users        int     `json:"users"`
	PIN          bool    `json:"pin"`
	SetupSeconds float64 `json:"setup_seconds"`
	State        string  `json:"state"`
}

// run does the setup and the load and prints the summary on stdout. It
// returns the exit code and the error to print.
func (b *bench) run(ctx context.Context, stdout io.Writer) (int, error) {
	cfg := b.cfg
	if cfg.pid > 0 { // fail before the setup when -pid is wrong
		if _, err := readMem(procStatusPath(cfg.pid)); err != nil {
			return exitFailed, fmt.Errorf("-pid %d: %w", cfg.pid, err)
		}
	}

	// The tokens get the PIN in modes pin and wrong (wrong may run with
	// an empty PIN); mode valid has none (parseFlags refuses -pin there).
	pin := ""
	if cfg.mode != modeValid {
		pin = cfg.pin
	}

	var users []*benchUser
	var setupTook time.Duration
	if cfg.skipSetup {
		st, all, err := loadState(cfg.state)
		if err != nil {
			return exitFailed, err
		}
		if users, err = b.checkState(st, all, pin); err != nil {
			return exitFailed, err
		}
		if err := b.probe(ctx); err != nil {
			return exitFailed, err
		}
	} else {
		var err error
		if users, err = newUsers(cfg.prefix, cfg.users, rand.Reader); err != nil {
			return exitFailed, err
		}
		fmt.Fprintf(b.log, "setup: %d users and HOTP tokens in realm %s on %s (%d workers)\n", len(users), cfg.realm, b.base, cfg.setupWorkers)
		res, err := b.setup(ctx, users, pin)
		if ctx.Err() != nil {
			return exitInterrupted, errors.New("interrupted during setup")
		}
		if err != nil {
			return exitFailed, fmt.Errorf("setup: %w", err)
		}
		setupTook = res.took
		fmt.Fprintf(b.log, "setup: done in %.3fs (resolver %s reads %s; keep that file while the resolver exists)\n",
			res.took.Seconds(), res.resolver, res.passwdPath)
		if cfg.state != "" {
			if err := saveState(cfg.state, newState(cfg.realm, cfg.prefix, pin != "", users)); err != nil {
				return exitFailed, err
			}
			fmt.Fprintf(b.log, "setup: token keys saved in %s (mode 0600)\n", cfg.state)
		}
		if cfg.setupOnly {
			if cfg.json {
				return exitOK, writeJSON(stdout, setupSummary{
					URL: b.base, Realm: cfg.realm, Resolver: res.resolver, PasswdFile: res.passwdPath,
					Users: len(users), PIN: pin != "", SetupSeconds: round3(res.took.Seconds()), State: cfg.state,
				})
			}
			_, err := fmt.Fprintf(stdout, "setup of %d users in realm %s took %.3fs\n", len(users), cfg.realm, res.took.Seconds())
			return exitOK, err
		}
	}

	clients := min(cfg.clients, len(users))
	if clients < cfg.clients {
		fmt.Fprintf(b.log, "load: only %d users, so %d clients instead of %d (a user belongs to one client)\n", len(users), clients, cfg.clients)
	}
	var before memInfo
	if cfg.pid > 0 {
		m, err := readMem(procStatusPath(cfg.pid))
		if err != nil {
			return exitFailed, fmt.Errorf("-pid %d: %w", cfg.pid, err)
		}
		before = m
	}
	// With -kdf-alone the load and the hashing alone alternate in rounds,
	// so that the machine's speed, which drifts by ±10 % within seconds on
	// shared hardware, weighs on both alike.
	rounds := 1
	if cfg.kdfFor > 0 {
		rounds = cfg.kdfRounds
	}
	fmt.Fprintf(b.log, "load: mode %s, %d clients, %s", cfg.mode, clients, cfg.duration)
	if cfg.kdfFor > 0 {
		fmt.Fprintf(b.log, ", alternating with %s of hashing alone in %d rounds", cfg.kdfFor, rounds)
	}
	fmt.Fprintln(b.log)
	t := &tally{}
	var elapsed time.Duration
	var kdf kdfRun
	for r := range rounds {
		slice := cfg.duration / time.Duration(rounds)
		if r == rounds-1 {
			slice = cfg.duration - slice*time.Duration(rounds-1)
		}
		rt, re := b.load(ctx, users, clients, slice)
		t.merge(rt)
		elapsed += re
		if cfg.kdfFor == 0 || ctx.Err() != nil {
			break
		}
		kdf.add(measureKDF(ctx, cfg.kdfFor/time.Duration(rounds)))
	}
	interrupted := ctx.Err() != nil

	s := newSummary(cfg, clients, len(users), t, elapsed)
	s.SetupSeconds = round3(setupTook.Seconds())
	s.Interrupted = interrupted
	if cfg.pid > 0 {
		m, err := readMem(procStatusPath(cfg.pid))
		if err != nil {
			fmt.Fprintf(b.log, "authbench: -pid %d after the load: %v\n", cfg.pid, err)
		} else {
			s.Server = &serverMemory{PID: cfg.pid, RSSBeforeKB: before.RSS, RSSKB: m.RSS, HWMKB: m.HWM}
		}
	}
	if cfg.kdfFor > 0 && !interrupted {
		k := kdf.result(rounds)
		if k.HashesPerSec > 0 {
			k.LoadShare = round3(s.RequestsPerSec / k.HashesPerSec)
		}
		s.KDFAlone = &k
	}

	var saveErr error
	if cfg.state != "" {
		st := newState(cfg.realm, cfg.prefix, pin != "", users)
		if cfg.skipSetup {
			st = b.mergeState(users)
		}
		saveErr = saveState(cfg.state, st)
	}

	var err error
	if cfg.json {
		err = writeJSON(stdout, s)
	} else {
		err = s.writeText(stdout)
	}
	switch {
	case err != nil:
		return exitFailed, err
	case saveErr != nil:
		return exitFailed, fmt.Errorf("saving the counters: %w (the next -skip-setup run may fail)", saveErr)
	case interrupted:
		return exitInterrupted, errors.New("interrupted")
	case s.Errors.Total > 0:
		return exitFailed, fmt.Errorf("%d of %d requests failed", s.Errors.Total, s.Requests)
	case s.Successes == 0:
		return exitFailed, errors.New("no request completed")
	}
	return exitOK, nil
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// checkState matches a state file against the flags: same realm and
// prefix, a PIN on the tokens exactly when the mode needs one, and at
// most as many users as it holds (-users picks the first N).
func (b *bench) checkState(st *state, all []*benchUser, pin string) ([]*benchUser, error) {
	cfg := b.cfg
	if cfg.realmSet && st.Realm != cfg.realm {
		return nil, fmt.Errorf("state file %s is for realm %s, not %s", cfg.state, st.Realm, cfg.realm)
	}
	if cfg.prefixSet && st.Prefix != cfg.prefix {
		return nil, fmt.Errorf("state file %s is for prefix %s, not %s", cfg.state, st.Prefix, cfg.prefix)
	}
	cfg.realm, cfg.prefix = st.Realm, st.Prefix
	switch {
	case st.PIN && pin == "":
		return nil, fmt.Errorf("the tokens in %s have a PIN: use -mode pin or wrong with -pin, or run the setup again", cfg.state)
	case !st.PIN && cfg.mode == modePIN:
		return nil, fmt.Errorf("the tokens in %s have no PIN: mode pin needs a setup with -mode pin", cfg.state)
	case !st.PIN && pin != "":
		return nil, fmt.Errorf("the tokens in %s have no PIN: drop -pin", cfg.state)
	}
	if cfg.usersSet {
		if cfg.users > len(all) {
			return nil, fmt.Errorf("-users %d: state file %s has only %d users", cfg.users, cfg.state, len(all))
		}
		all = all[:cfg.users]
	}
	b.loaded = st
	return all, nil
}

// mergeState updates the counters of the users this run used in the
// state file as read (with -users N, the others stay as they were).
func (b *bench) mergeState(used []*benchUser) *state {
	st := b.loaded
	for i, u := range used {
		st.Users[i].Counter = u.Counter
	}
	return st
}

// probe checks that the server answers before a -skip-setup load, so a
// wrong -url fails with one clear message instead of a run of errors. It
// asks /healthz/livez first; a server without it (privacyIDEA 3.10 and
// earlier answer 404) is alive when POST /validate/check without
// parameters answers a privacyIDEA JSON envelope (an error, since the
// user is missing; no user is looked up and no token is touched).
func (b *bench) probe(ctx context.Context) error {
	status, _, err := b.probeRequest(ctx, http.MethodGet, "/healthz/livez")
	if err != nil {
		return fmt.Errorf("the server does not answer: %w", err)
	}
	if status == http.StatusOK {
		return nil
	}
	vstatus, body, err := b.probeRequest(ctx, http.MethodPost, "/validate/check")
	if err != nil {
		return fmt.Errorf("the server does not answer: %w", err)
	}
	var env struct {
		Result *struct {
			Status *bool `json:"status"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &env) != nil || env.Result == nil || env.Result.Status == nil {
		return fmt.Errorf("the server's liveness probe answered HTTP %d, and POST /validate/check answered HTTP %d without a JSON envelope: %s",
			status, vstatus, snippet(body))
	}
	return nil
}

// probeRequest sends one request without parameters and returns the
// status and the start of the body.
func (b *bench) probeRequest(ctx context.Context, method, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, body)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, raw, nil
}
