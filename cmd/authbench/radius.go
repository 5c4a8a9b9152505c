package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/authsrv/authsrv/internal/radclient"
)

// The "radius" subcommand sends PAP Access-Requests (with a
// Message-Authenticator) carrying fresh HOTP values and reports the same
// figures as the HTTP load. With -compare it answers in one run what the
// built-in RADIUS server gains over what sites run today, FreeRADIUS with
// a Perl module calling the HTTP API: same server, same users and tokens,
// the targets measured in alternating slices.

// envRadiusSecret holds the shared secret of a running RADIUS server.
const envRadiusSecret = "AUTHBENCH_RADIUS_SECRET"

const radiusUsage = `usage: authbench radius -addr HOST:PORT -state FILE [flags]
       authbench radius -compare (-server PATH | -url URL -addr HOST:PORT) [flags]

The first form sends PAP Access-Requests with a Message-Authenticator from
-clients goroutines for -duration to the RADIUS server at -addr, each with
a fresh HOTP value of a user of -state (written by "authbench -setup-only
-state FILE"; the counters are saved back), and prints requests/s, latency
percentiles and errors. The NAS 127.0.0.1 must be a client of the server
with the realm of the state file (realm=R in authsrv's -radius-clients).

-compare measures in one run, with the same users and tokens, alternating
slices of -duration/-rounds: the built-in RADIUS server of authsrv,
FreeRADIUS with rlm_perl posting to /validate/check of the same authsrv
(started here, on 127.0.0.1, with a configuration of its own), and
/validate/check directly. -server PATH starts that authsrv binary with a
new data directory and -radius-listen; -url drives a running one (admin
password in $AUTHBENCH_ADMIN_PASSWORD) whose built-in RADIUS server is at
-addr, with 127.0.0.1 a client with realm=-realm.

The shared secret of -addr comes from $AUTHBENCH_RADIUS_SECRET. Only
loopback addresses are accepted. The exit status is 1 when a request
failed (a timeout, a reject, a challenge).

flags:
`

// radiusConfig is the radius subcommand's command line.
type radiusConfig struct {
	addr       string
	secret     []byte
	state      string
	pin        string
	users      int
	usersSet   bool
	clients    int
	duration   time.Duration
	timeout    time.Duration
	retries    int
	json       bool
	compare    bool
	server     string
	serverArgs []string
	url        *url.URL
	admin      string
	password   string
	realm      string
	warmup     time.Duration
	rounds     int
	http       bool
	threads    int
	passwdDir  string
}

func parseRadius(args []string, stderr io.Writer, getenv func(string) string) (*radiusConfig, error) {
	fs := flag.NewFlagSet("authbench radius", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, radiusUsage)
		fs.PrintDefaults()
	}
	c := &radiusConfig{}
	var extra stringList
	fs.StringVar(&c.addr, "addr", "", "host:port of the RADIUS server (loopback)")
	fs.StringVar(&c.state, "state", "", "state file of a setup (users, token keys, counters)")
	fs.IntVar(&c.users, "users", 64, "number of users (-compare: enrolled; else: the first N of -state)")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients, each with its own users")
	fs.DurationVar(&c.duration, "duration", 15*time.Second, "measured load (-compare: per target)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "how long a request waits for its answer")
	fs.IntVar(&c.retries, "retries", 0, "resends of an unanswered request (a NAS's retransmissions)")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	fs.BoolVar(&c.compare, "compare", false, "compare the built-in RADIUS server with FreeRADIUS + rlm_perl + HTTP")
	fs.StringVar(&c.server, "server", "", "-compare: the authsrv binary to start")
	fs.Var(&extra, "server-arg", "-compare: extra argument for \"authsrv serve\" (repeatable)")
	rawURL := fs.String("url", "", "-compare: base URL of a running authsrv (instead of -server)")
	fs.StringVar(&c.admin, "admin", "admin", "-compare with -url: admin user name for the setup")
	fs.StringVar(&c.realm, "realm", "radbench", "-compare: realm of the users")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "-compare: unmeasured load per target first")
	fs.IntVar(&c.rounds, "rounds", 2, "-compare: alternating slices of -duration per target")
	fs.BoolVar(&c.http, "http", true, "-compare: measure /validate/check directly too")
	fs.IntVar(&c.threads, "freeradius-threads", 32, "-compare: FreeRADIUS worker threads")
	fs.StringVar(&c.passwdDir, "passwd-dir", "", "-compare with -url: directory for the passwd file the server reads")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "users" {
			c.usersSet = true
		}
	})
	c.serverArgs = extra
	c.secret = []byte(getenv(envRadiusSecret))
	c.pin = getenv(envPIN)
	c.realm = strings.ToLower(c.realm)
	var errs []error
	if c.addr != "" {
		if err := checkLoopbackAddr(c.addr); err != nil {
			errs = append(errs, fmt.Errorf("-addr: %w", err))
		}
	}
	needAddr := func() {
		if c.addr == "" {
			errs = append(errs, errors.New("give -addr HOST:PORT, the RADIUS server"))
		}
		if len(c.secret) == 0 {
			errs = append(errs, fmt.Errorf("the shared secret of -addr is missing: set $%s", envRadiusSecret))
		}
	}
	if c.compare {
		switch {
		case c.server == "" && *rawURL == "":
			errs = append(errs, errors.New("-compare needs -server PATH (start authsrv) or -url URL (a running one)"))
		case c.server != "" && *rawURL != "":
			errs = append(errs, errors.New("-server and -url exclude each other"))
		case c.server != "":
			if fi, err := os.Stat(c.server); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				errs = append(errs, fmt.Errorf("-server %q: not an executable file", c.server))
			}
			if c.addr != "" {
				errs = append(errs, errors.New("-addr goes with -url: with -server the RADIUS port is picked here"))
			}
		default:
			u, err := parseBaseURL(*rawURL)
			if err != nil {
				errs = append(errs, err)
			}
			c.url = u
			c.password = getenv(envAdminPassword)
			if c.password == "" {
				errs = append(errs, fmt.Errorf("-url needs the admin password in $%s", envAdminPassword))
			}
			needAddr()
		}
		if c.pin != "" {
			errs = append(errs, fmt.Errorf("-compare enrols tokens without a PIN: unset $%s", envPIN))
		}
		if c.users < c.clients || c.users > maxUsers {
			errs = append(errs, fmt.Errorf("-users %d: want -clients (%d) to %d", c.users, c.clients, maxUsers))
		}
		if c.rounds < 1 || c.rounds > 100 {
			errs = append(errs, fmt.Errorf("-rounds %d: want 1 to 100", c.rounds))
		}
		if c.threads < 1 || c.threads > 1024 {
			errs = append(errs, fmt.Errorf("-freeradius-threads %d: want 1 to 1024", c.threads))
		}
		if !nameRe.MatchString(c.realm) {
			errs = append(errs, fmt.Errorf("-realm %q: use letters, digits, '.', '-' and '_'", c.realm))
		}
	} else {
		needAddr()
		if c.state == "" {
			errs = append(errs, errors.New("give -state FILE, written by \"authbench -setup-only -state FILE\""))
		}
		if *rawURL != "" || c.server != "" {
			errs = append(errs, errors.New("-url and -server go with -compare"))
		}
		if c.users < 1 {
			errs = append(errs, fmt.Errorf("-users %d: want at least 1", c.users))
		}
	}
	if c.clients < 1 {
		errs = append(errs, fmt.Errorf("-clients %d: want at least 1", c.clients))
	}
	if c.duration <= 0 || c.timeout <= 0 || c.warmup < 0 {
		errs = append(errs, errors.New("-duration and -timeout must be more than 0, -warmup not negative"))
	}
	if c.retries < 0 || c.retries > 10 {
		errs = append(errs, fmt.Errorf("-retries %d: want 0 to 10", c.retries))
	}
	if len(c.pin)+otpDigits > radclient.MaxPasswordLen || strings.ContainsAny(c.pin, "\x00\r\n") {
		errs = append(errs, errors.New("the PIN is too long for RADIUS or holds a control character"))
	}
	return c, errors.Join(errs...)
}

// checkLoopbackAddr accepts host:port with a loopback host and a port.
func checkLoopbackAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if !isLoopbackHost(host) {
		return fmt.Errorf("host %q is not a loopback address; authbench only drives a server on this machine", host)
	}
	if p, err := net.LookupPort("udp", port); err != nil || p < 1 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

func runRadius(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cfg, err := parseRadius(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "authbench radius: %v\n", err)
		return exitUsage
	}
	var out interface{ writeText(io.Writer) error }
	if cfg.compare {
		var sum *radiusSummary
		sum, err = radiusCompare(ctx, cfg, stderr)
		if sum != nil {
			out = sum
		}
	} else {
		var sum *summary
		sum, err = radiusSingle(ctx, cfg, stderr)
		if sum != nil {
			out = sum
		}
	}
	if out != nil {
		var werr error
		if cfg.json {
			werr = writeJSON(stdout, out)
		} else {
			werr = out.writeText(stdout)
		}
		if err == nil {
			err = werr
		}
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "authbench radius: interrupted")
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "authbench radius: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// radTarget is a RADIUS server the load sends to, as the NAS 127.0.0.1.
type radTarget struct {
	addr    string
	secret  []byte
	timeout time.Duration
	retries int
	pin     string
}

// check sends one Access-Request for u with pass and classifies the
// answer: Access-Accept is a success, Reject and Challenge are wrong
// values, no valid answer a transport error. Messages hold no secret.
func (r *radTarget) check(ctx context.Context, u *benchUser, pass string) (outcome, string) {
	retries := r.retries
	if retries == 0 {
		retries = -1 // radclient: none
	}
	resp, err := radclient.Exchange(ctx, radclient.Request{
		Addr: r.addr, Secret: r.secret, Username: u.Login, Password: pass,
		NASIdentifier: "authbench", Timeout: r.timeout, Retries: retries,
	})
	if err != nil {
		if ctx.Err() != nil {
			return outCancelled, ""
		}
		return outTransport, err.Error()
	}
	if resp.Code == radclient.Accept {
		return outOK, ""
	}
	msg := resp.Code.String() + " for " + u.Login
	if resp.ReplyMessage != "" {
		msg += " (" + resp.ReplyMessage + ")"
	}
	return outValue, msg
}

// radiusLoad runs clients goroutines against t for d, each owning the
// users i with i%clients == its number, as bench.load does for HTTP.
func radiusLoad(ctx context.Context, t *radTarget, users []*benchUser, clients int, d time.Duration) (*tally, time.Duration) {
	return runClients(ctx, users, clients, d, func(ctx context.Context, own []*benchUser, end time.Time, ta *tally) {
		radiusClient(ctx, t, own, end, ta)
	})
}

// radiusClient sends one request at a time, cycling through its users.
func radiusClient(ctx context.Context, t *radTarget, users []*benchUser, end time.Time, ta *tally) {
	for _, u := range users {
		if u.gen == nil {
			u.gen = newHOTP(u.Key, otpDigits)
		}
	}
	for i := 0; ctx.Err() == nil && time.Now().Before(end); i++ {
		u := users[i%len(users)]
		t0 := time.Now()
		o, msg := t.check(ctx, u, t.pin+u.gen.At(u.Counter))
		lat := time.Since(t0)
		// As over HTTP: a reject kept the server's counter; anything
		// else may have used the value.
		if o != outValue {
			u.Counter++
		}
		if o == outCancelled {
			return
		}
		ta.record(o, lat, msg)
		if o == outTransport {
			sleep(ctx, min(transportBackoff, time.Until(end)))
		}
	}
}

// radiusSingle is the first form: a load against -addr with -state's
// users; the counters go back into the state file.
func radiusSingle(ctx context.Context, cfg *radiusConfig, log io.Writer) (*summary, error) {
	st, users, err := loadState(cfg.state)
	if err != nil {
		return nil, err
	}
	switch {
	case st.PIN && cfg.pin == "":
		return nil, fmt.Errorf("the tokens in %s have a PIN: set $%s", cfg.state, envPIN)
	case !st.PIN && cfg.pin != "":
		return nil, fmt.Errorf("the tokens in %s have no PIN: unset $%s", cfg.state, envPIN)
	}
	if cfg.usersSet {
		if cfg.users > len(users) {
			return nil, fmt.Errorf("-users %d: state file %s has only %d users", cfg.users, cfg.state, len(users))
		}
		users = users[:cfg.users]
	}
	clients := min(cfg.clients, len(users))
	target := &radTarget{addr: cfg.addr, secret: cfg.secret, timeout: cfg.timeout, retries: cfg.retries, pin: cfg.pin}
	fmt.Fprintf(log, "radius: %d users of realm %s, %d clients, %s against %s\n", len(users), st.Realm, clients, cfg.duration, cfg.addr)
	t, elapsed := radiusLoad(ctx, target, users, clients, cfg.duration)
	mode := modeValid
	if cfg.pin != "" {
		mode = modePIN
	}
	s := newSummary(&config{mode: mode, base: &url.URL{Scheme: "radius", Host: cfg.addr}}, clients, len(users), t, elapsed)
	s.Interrupted = ctx.Err() != nil
	for i, u := range users {
		st.Users[i].Counter = u.Counter
	}
	if err := saveState(cfg.state, st); err != nil {
		return s, fmt.Errorf("saving the counters: %w (the next run may fail)", err)
	}
	switch {
	case s.Errors.Total > 0:
		return s, fmt.Errorf("%d of %d requests failed", s.Errors.Total, s.Requests)
	case s.Successes == 0 && !s.Interrupted:
		return s, errors.New("no request completed")
	}
	return s, nil
}

// Targets of -compare.
const (
	targetBuiltin    = "builtin"
	targetFreeRADIUS = "freeradius"
	targetHTTP       = "http"
)

// radiusRow is one target's figures in -compare.
type radiusRow struct {
	Target string `json:"target"`
	Path   string `json:"path"`
	ratioTarget
}

// radiusSummary is the printed result of -compare.
type radiusSummary struct {
	Authsrv         string      `json:"authsrv"`
	FreeRADIUS      string      `json:"freeradius"`
	Builtin         string      `json:"builtin"`
	Users           int         `json:"users"`
	Clients         int         `json:"clients"`
	DurationSeconds float64     `json:"duration_seconds"`
	Rounds          int         `json:"rounds"`
	Rows            []radiusRow `json:"rows"`
	// Speedup is the built-in server's requests/s over FreeRADIUS's,
	// P99Ratio FreeRADIUS's p99 over the built-in server's.
	Speedup     float64 `json:"speedup"`
	P99Ratio    float64 `json:"p99_ratio"`
	Interrupted bool    `json:"interrupted,omitempty"`
}

// radiusCompare starts what it must, enrols the users and measures the
// targets in alternating slices.
func radiusCompare(ctx context.Context, cfg *radiusConfig, log io.Writer) (*radiusSummary, error) {
	bc := &config{admin: cfg.admin, password: cfg.password, users: cfg.users, clients: cfg.clients, mode: modeValid,
		realm: cfg.realm, prefix: "radbench", passwdDir: cfg.passwdDir, setupWorkers: 4, timeout: cfg.timeout, base: cfg.url}
	builtin := &radTarget{addr: cfg.addr, secret: cfg.secret, timeout: cfg.timeout, retries: cfg.retries}
	authPID := 0
	if cfg.server != "" {
		tmp, err := os.MkdirTemp("", "authbench-radius-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		builtin.secret = randomSecret()
		clientsFile := filepath.Join(tmp, "radius-clients")
		line := fmt.Sprintf("127.0.0.1 %s realm=%s\n", builtin.secret, cfg.realm)
		if err := os.WriteFile(clientsFile, []byte(line), 0o600); err != nil {
			return nil, err
		}
		port, err := freeUDPPort()
		if err != nil {
			return nil, err
		}
		builtin.addr = fmt.Sprintf("127.0.0.1:%d", port)
		dataDir := filepath.Join(tmp, "data")
		fmt.Fprintf(log, "radius: starting %s with data in %s, RADIUS on %s\n", cfg.server, dataDir, builtin.addr)
		args := append(append([]string{}, cfg.serverArgs...), "-radius-listen", builtin.addr, "-radius-clients", clientsFile)
		srv, err := startServer(ctx, cfg.server, dataDir, args)
		if err != nil {
			return nil, err
		}
		defer func() { _ = srv.stop() }()
		if srv.password == "" {
			return nil, errors.New("the server printed no first admin password")
		}
		bc.password = srv.password
		authPID = srv.pid
		bc.passwdDir = filepath.Join(dataDir, "files")
		if bc.base, err = parseBaseURL("http://" + srv.addr); err != nil {
			return nil, err
		}
		if err := waitRadius(ctx, builtin); err != nil {
			return nil, err
		}
	}

	auth := newBench(bc, log)
	defer auth.close()
	users, err := newUsers(bc.prefix, cfg.users, rand.Reader)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "radius: setup of %d users and HOTP tokens in realm %s on %s\n", len(users), cfg.realm, auth.base)
	if _, err := auth.setup(ctx, users, ""); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}

	frSecret := randomSecret()
	fr, err := startFreeRADIUS(ctx, perlRadiusConfig{checkURL: auth.base + "/validate/check", realm: cfg.realm,
		secret: frSecret, threads: cfg.threads})
	if err != nil {
		return nil, err
	}
	defer fr.stop()
	fmt.Fprintf(log, "radius: FreeRADIUS (pid %d) with rlm_perl on %s posts to %s/validate/check\n", fr.pid, fr.addr, auth.base)
	viaFR := &radTarget{addr: fr.addr, secret: frSecret, timeout: cfg.timeout, retries: cfg.retries}

	type target struct {
		name, path string
		load       func(time.Duration) (*tally, time.Duration)
		pids       []int
		t          *tally
		elapsed    time.Duration
		cpu        []*cpuMeter
	}
	targets := []*target{
		{name: targetBuiltin, path: "RADIUS -> authsrv " + builtin.addr, pids: []int{authPID},
			load: func(d time.Duration) (*tally, time.Duration) { return radiusLoad(ctx, builtin, users, cfg.clients, d) }},
		{name: targetFreeRADIUS, path: "RADIUS -> FreeRADIUS " + fr.addr + " -> rlm_perl -> HTTP", pids: []int{fr.pid, authPID},
			load: func(d time.Duration) (*tally, time.Duration) { return radiusLoad(ctx, viaFR, users, cfg.clients, d) }},
	}
	if cfg.http {
		targets = append(targets, &target{name: targetHTTP, path: "HTTP POST " + auth.base + "/validate/check", pids: []int{authPID},
			load: func(d time.Duration) (*tally, time.Duration) { return auth.load(ctx, users, cfg.clients, d) }})
	}
	fmt.Fprintf(log, "radius: %d clients: %s warm-up each, then %d alternating slices of %s\n",
		cfg.clients, cfg.warmup, cfg.rounds, cfg.duration/time.Duration(cfg.rounds))
	for _, tg := range targets {
		tg.t = &tally{}
		for _, pid := range tg.pids {
			tg.cpu = append(tg.cpu, &cpuMeter{pid: pid})
		}
		if cfg.warmup > 0 {
			tg.load(cfg.warmup)
		}
	}
	for r := range cfg.rounds {
		slice := cfg.duration / time.Duration(cfg.rounds)
		if r == cfg.rounds-1 {
			slice = cfg.duration - slice*time.Duration(cfg.rounds-1)
		}
		for _, tg := range targets {
			for _, m := range tg.cpu {
				m.start()
			}
			t, e := tg.load(slice)
			for _, m := range tg.cpu {
				m.stop()
			}
			tg.t.merge(t)
			tg.elapsed += e
		}
	}

	sum := &radiusSummary{Authsrv: auth.base, FreeRADIUS: fr.addr, Builtin: builtin.addr, Users: len(users), Clients: cfg.clients,
		DurationSeconds: cfg.duration.Seconds(), Rounds: cfg.rounds, Interrupted: ctx.Err() != nil}
	var failed []string
	for _, tg := range targets {
		row := radiusRow{Target: tg.name, Path: tg.path, ratioTarget: targetOf(tg.t, tg.elapsed)}
		cpu := 0.0
		for _, m := range tg.cpu {
			c := m.perRequest(tg.t.requests)
			if c == 0 {
				cpu = 0
				break
			}
			cpu += c
		}
		row.CPUPerRequestUS = math.Round(cpu*10) / 10
		if row.Errors > 0 || row.Requests == 0 {
			failed = append(failed, fmt.Sprintf("%s: %d of %d requests failed %s", tg.name, row.Errors, row.Requests, row.FirstErr))
			if tg.name == targetFreeRADIUS {
				fmt.Fprintf(log, "radius: the end of FreeRADIUS's log:\n%s\n", fr.logTail())
			}
		}
		sum.Rows = append(sum.Rows, row)
	}
	b, f := sum.Rows[0], sum.Rows[1]
	if f.PerSecond > 0 {
		sum.Speedup = math.Round(b.PerSecond/f.PerSecond*100) / 100
	}
	if b.LatencyMS.P99 > 0 {
		sum.P99Ratio = math.Round(f.LatencyMS.P99/b.LatencyMS.P99*100) / 100
	}
	if sum.Interrupted {
		return sum, ctx.Err()
	}
	if len(failed) > 0 {
		return sum, errors.New(strings.Join(failed, "; "))
	}
	return sum, nil
}

// randomSecret is a new shared secret: 32 hex digits.
func randomSecret() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return []byte(hex.EncodeToString(b))
}

// waitRadius waits until the RADIUS server answers a request (for a user
// that does not exist, so no token is touched), up to a minute.
func waitRadius(ctx context.Context, t *radTarget) error {
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		_, err := radclient.Exchange(ctx, radclient.Request{Addr: t.addr, Secret: t.secret, Username: "authbench-probe",
			Password: "probe", NASIdentifier: "authbench", Timeout: 500 * time.Millisecond, Retries: -1})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		last = err
	}
	return fmt.Errorf("the built-in RADIUS server on %s does not answer: %w", t.addr, last)
}

// writeText prints the comparison as a table.
func (s *radiusSummary) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "PAP Access-Request, HOTP success: %d users, %d clients, %gs per target in %d alternating slices\n",
		s.Users, s.Clients, s.DurationSeconds, s.Rounds)
	if s.Interrupted {
		b.WriteString("interrupted: the figures cover the time until the interrupt\n")
	}
	fmt.Fprintf(&b, "%-11s %10s %9s %9s %9s %9s %7s %10s  %s\n", "target", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors", "cpu us/req", "path")
	for _, r := range s.Rows {
		cpu := "-"
		if r.CPUPerRequestUS > 0 {
			cpu = fmt.Sprintf("%.1f", r.CPUPerRequestUS)
		}
		fmt.Fprintf(&b, "%-11s %10.1f %9.3f %9.3f %9.3f %9.3f %7d %10s  %s\n", r.Target, r.PerSecond, r.LatencyMS.P50,
			r.LatencyMS.P90, r.LatencyMS.P99, r.LatencyMS.Max, r.Errors, cpu, r.Path)
	}
	b.WriteString("cpu us/req: CPU time of the processes on the path per request (authsrv; FreeRADIUS + authsrv), when authbench started them\n")
	fmt.Fprintf(&b, "built-in/FreeRADIUS: %.2fx the requests/s; FreeRADIUS p99 %.2fx the built-in's (rlm_perl opens an HTTP connection per request, as privacyIDEA's plugin)\n", s.Speedup, s.P99Ratio)
	for _, r := range s.Rows {
		if r.FirstErr != "" {
			fmt.Fprintf(&b, "first error  %s: %s\n", r.Target, r.FirstErr)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
