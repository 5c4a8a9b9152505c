package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The "ratio" subcommand answers one question in one run: what share of a
// bare Go handler's requests/s does authsrv's /validate/check reach on
// this machine, HOTP success with durable counters, under the same load
// from the same tool. It starts (or is given) both servers, enrols HOTP
// tokens in authsrv, and at each client count runs the load against the
// bare handler and against authsrv in alternating slices, so that a drift
// of the machine's speed weighs on both alike.

const ratioUsage = `usage: authbench ratio (-server PATH | -url URL) [flags]

Runs the same /validate/check load (mode valid: fresh HOTP values, no PIN)
against the bare handler of "authbench bare" and against authsrv, at each
of -clients, and prints requests/s, p50 and p99 of both and the ratio
authsrv/bare.

-server PATH starts that authsrv binary with a new data directory (fsync'd
store, durable counters) on 127.0.0.1; -url drives a running one, whose
admin password comes from $AUTHBENCH_ADMIN_PASSWORD. -bare-url drives a
running bare handler; without it this binary is started as
"authbench bare". The exit status is 1 when a request failed.

flags:
`

// ratioConfig is the ratio subcommand's command line.
type ratioConfig struct {
	server     string
	serverArgs []string
	url        *url.URL
	bareURL    *url.URL
	admin      string
	password   string
	clients    []int
	users      int
	duration   time.Duration
	warmup     time.Duration
	rounds     int
	timeout    time.Duration
	json       bool
	passwdDir  string
}

func parseRatio(args []string, stderr io.Writer, getenv func(string) string) (*ratioConfig, error) {
	fs := flag.NewFlagSet("authbench ratio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, ratioUsage)
		fs.PrintDefaults()
	}
	c := &ratioConfig{}
	var extra stringList
	fs.StringVar(&c.server, "server", "", "the authsrv binary to start")
	fs.Var(&extra, "server-arg", "extra argument for \"authsrv serve\" (repeatable)")
	rawURL := fs.String("url", "", "base URL of a running authsrv (instead of -server)")
	rawBare := fs.String("bare-url", "", "base URL of a running \"authbench bare\" (default: start one)")
	fs.StringVar(&c.admin, "admin", "admin", "with -url: admin user name for the setup")
	clients := fs.String("clients", "8,32", "comma separated client counts")
	fs.IntVar(&c.users, "users", 64, "users with one HOTP token each (at least the largest client count)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured load per target and client count")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured load per target before each client count")
	fs.IntVar(&c.rounds, "rounds", 2, "alternating slices of -duration per target")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "timeout of each request")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	fs.StringVar(&c.passwdDir, "passwd-dir", "", "with -url: directory for the passwd file the server reads (default: a new temporary directory)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c.serverArgs = extra
	c.password = getenv(envAdminPassword)
	var errs []error
	switch {
	case c.server == "" && *rawURL == "":
		errs = append(errs, errors.New("give -server PATH (start authsrv) or -url URL (a running one)"))
	case c.server != "" && *rawURL != "":
		errs = append(errs, errors.New("-server and -url exclude each other"))
	case c.server != "":
		if fi, err := os.Stat(c.server); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("-server %q: not an executable file", c.server))
		}
	default:
		u, err := parseBaseURL(*rawURL)
		if err != nil {
			errs = append(errs, err)
		}
		c.url = u
		if c.password == "" {
			errs = append(errs, fmt.Errorf("-url needs the admin password in $%s", envAdminPassword))
		}
	}
	if *rawBare != "" {
		u, err := parseBaseURL(*rawBare)
		if err != nil {
			errs = append(errs, fmt.Errorf("-bare-url: %w", err))
		}
		c.bareURL = u
	}
	for _, f := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("-clients %q: want positive numbers separated by commas", *clients))
			break
		}
		c.clients = append(c.clients, n)
	}
	most := 0
	for _, n := range c.clients {
		most = max(most, n)
	}
	if c.users < most || c.users > maxUsers {
		errs = append(errs, fmt.Errorf("-users %d: want %d (the most clients) to %d", c.users, most, maxUsers))
	}
	if c.duration <= 0 || c.warmup < 0 || c.timeout <= 0 {
		errs = append(errs, errors.New("-duration and -timeout must be more than 0, -warmup not negative"))
	}
	if c.rounds < 1 || c.rounds > 100 {
		errs = append(errs, fmt.Errorf("-rounds %d: want 1 to 100", c.rounds))
	}
	return c, errors.Join(errs...)
}

// ratioTarget is one target's figures at one client count.
type ratioTarget struct {
	Requests  int64     `json:"requests"`
	Errors    int64     `json:"errors"`
	Seconds   float64   `json:"seconds"`
	PerSecond float64   `json:"requests_per_second"`
	LatencyMS latencyMS `json:"latency_ms"`
	// CPUPerRequestUS is the server process's CPU time (user and
	// system) per request, in microseconds, when authbench started it:
	// on a shared machine steadier than requests/s.
	CPUPerRequestUS float64 `json:"cpu_us_per_request,omitempty"`
	FirstErr        string  `json:"first_error,omitempty"`
}

// ratioRow is the comparison at one client count.
type ratioRow struct {
	Clients int         `json:"clients"`
	Bare    ratioTarget `json:"bare"`
	Authsrv ratioTarget `json:"authsrv"`
	// Ratio is authsrv's requests/s over the bare handler's.
	Ratio float64 `json:"ratio"`
	// P50Ratio is authsrv's median latency over the bare handler's.
	P50Ratio float64 `json:"p50_ratio"`
	// CPURatio is the bare handler's CPU per request over authsrv's
	// (both started by authbench), the ratio the machine would give if
	// both were bound by CPU alone.
	CPURatio float64 `json:"cpu_ratio,omitempty"`
}

// ratioSummary is the printed result.
type ratioSummary struct {
	Authsrv         string     `json:"authsrv"`
	Bare            string     `json:"bare"`
	Users           int        `json:"users"`
	DurationSeconds float64    `json:"duration_seconds"`
	Rounds          int        `json:"rounds"`
	Rows            []ratioRow `json:"rows"`
	Interrupted     bool       `json:"interrupted,omitempty"`
}

func runRatio(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cfg, err := parseRatio(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "authbench ratio: %v\n", err)
		return exitUsage
	}
	sum, err := ratio(ctx, cfg, stderr)
	if sum != nil {
		if cfg.json {
			if werr := writeJSON(stdout, sum); werr != nil && err == nil {
				err = werr
			}
		} else if werr := sum.writeText(stdout); werr != nil && err == nil {
			err = werr
		}
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "authbench ratio: interrupted")
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "authbench ratio: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// ratio starts what it must, sets up authsrv and runs the loads.
func ratio(ctx context.Context, cfg *ratioConfig, log io.Writer) (*ratioSummary, error) {
	most := 0
	for _, n := range cfg.clients {
		most = max(most, n)
	}
	bc := &config{admin: cfg.admin, password: cfg.password, users: cfg.users, clients: most, mode: modeValid,
		realm: "ratio", prefix: "ratio", passwdDir: cfg.passwdDir, setupWorkers: 4, timeout: cfg.timeout}
	bc.base = cfg.url
	authPID, barePID := 0, 0
	if cfg.server != "" {
		tmp, err := os.MkdirTemp("", "authbench-ratio-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dataDir := filepath.Join(tmp, "data")
		fmt.Fprintf(log, "ratio: starting %s with data in %s\n", cfg.server, dataDir)
		srv, err := startServer(ctx, cfg.server, dataDir, cfg.serverArgs)
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
	}
	if cfg.bareURL == nil {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		bare, err := startBare(ctx, self)
		if err != nil {
			return nil, err
		}
		defer func() { _ = bare.stop() }()
		barePID = bare.pid
		if cfg.bareURL, err = parseBaseURL("http://" + bare.addr); err != nil {
			return nil, err
		}
	}

	auth := newBench(bc, log)
	defer auth.close()
	users, err := newUsers(bc.prefix, cfg.users, rand.Reader)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "ratio: setup of %d users and HOTP tokens on %s\n", len(users), auth.base)
	if _, err := auth.setup(ctx, users, ""); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	barec := *bc
	barec.base = cfg.bareURL
	bare := newBench(&barec, log)
	defer bare.close()
	// The bare handler checks no counters; its users are copies, so the
	// load against it leaves authsrv's counters where they are.
	bareUsers := make([]*benchUser, len(users))
	for i, u := range users {
		c := *u
		bareUsers[i] = &c
	}

	sum := &ratioSummary{Authsrv: auth.base, Bare: bare.base, Users: len(users),
		DurationSeconds: cfg.duration.Seconds(), Rounds: cfg.rounds}
	var failed []string
	for _, n := range cfg.clients {
		fmt.Fprintf(log, "ratio: %d clients: %s warm-up each, then %d alternating slices of %s\n", n, cfg.warmup, cfg.rounds, cfg.duration/time.Duration(cfg.rounds))
		if cfg.warmup > 0 {
			bare.load(ctx, bareUsers, n, cfg.warmup)
			auth.load(ctx, users, n, cfg.warmup)
		}
		bt, at := &tally{}, &tally{}
		var be, ae time.Duration
		bc, ac := &cpuMeter{pid: barePID}, &cpuMeter{pid: authPID}
		for r := range cfg.rounds {
			slice := cfg.duration / time.Duration(cfg.rounds)
			if r == cfg.rounds-1 {
				slice = cfg.duration - slice*time.Duration(cfg.rounds-1)
			}
			bc.start()
			t, e := bare.load(ctx, bareUsers, n, slice)
			bc.stop()
			bt.merge(t)
			be += e
			ac.start()
			t, e = auth.load(ctx, users, n, slice)
			ac.stop()
			at.merge(t)
			ae += e
		}
		row := ratioRow{Clients: n, Bare: targetOf(bt, be), Authsrv: targetOf(at, ae)}
		row.Bare.CPUPerRequestUS, row.Authsrv.CPUPerRequestUS = bc.perRequest(bt.requests), ac.perRequest(at.requests)
		if row.Bare.CPUPerRequestUS > 0 && row.Authsrv.CPUPerRequestUS > 0 {
			row.CPURatio = math.Round(row.Bare.CPUPerRequestUS/row.Authsrv.CPUPerRequestUS*1000) / 1000
		}
		if row.Bare.PerSecond > 0 {
			row.Ratio = math.Round(row.Authsrv.PerSecond/row.Bare.PerSecond*1000) / 1000
		}
		if row.Bare.LatencyMS.P50 > 0 {
			row.P50Ratio = math.Round(row.Authsrv.LatencyMS.P50/row.Bare.LatencyMS.P50*100) / 100
		}
		sum.Rows = append(sum.Rows, row)
		for name, t := range map[string]ratioTarget{"bare": row.Bare, "authsrv": row.Authsrv} {
			if t.Errors > 0 || t.Requests == 0 {
				failed = append(failed, fmt.Sprintf("%s at %d clients: %d of %d requests failed %s", name, n, t.Errors, t.Requests, t.FirstErr))
			}
		}
		if ctx.Err() != nil {
			sum.Interrupted = true
			return sum, ctx.Err()
		}
	}
	if len(failed) > 0 {
		return sum, errors.New(strings.Join(failed, "; "))
	}
	return sum, nil
}

// cpuMeter sums a process's CPU time over the slices of its load.
type cpuMeter struct {
	pid   int
	at    int64 // ticks when the running slice started; -1: unknown
	ticks int64
	bad   bool
}

func (m *cpuMeter) start() {
	if m.pid > 0 && !m.bad {
		var err error
		if m.at, err = cpuTicks(m.pid); err != nil {
			m.bad = true
		}
	}
}

func (m *cpuMeter) stop() {
	if m.pid > 0 && !m.bad {
		t, err := cpuTicks(m.pid)
		if err != nil {
			m.bad = true
			return
		}
		m.ticks += t - m.at
	}
}

// perRequest is the CPU time per request in microseconds (0: unknown).
func (m *cpuMeter) perRequest(requests int64) float64 {
	if m.pid <= 0 || m.bad || requests == 0 {
		return 0
	}
	return math.Round(float64(m.ticks)*1e6/clockTicks/float64(requests)*10) / 10
}

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const clockTicks = 100

// cpuTicks reads a process's user and system CPU time from
// /proc/<pid>/stat, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatTicks(string(b))
}

// parseStatTicks takes utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name in parentheses may hold spaces.
func parseStatTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat line")
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat line")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc stat times")
	}
	return u + s, nil
}

// targetOf sums a target's tally.
func targetOf(t *tally, elapsed time.Duration) ratioTarget {
	st := summarize(t.lat)
	r := ratioTarget{
		Requests: t.requests, Errors: t.status + t.transport + t.value, Seconds: round3(elapsed.Seconds()),
		LatencyMS: latencyMS{P50: ms(st.P50), P90: ms(st.P90), P99: ms(st.P99), Max: ms(st.Max), Mean: ms(st.Mean)},
	}
	if elapsed > 0 {
		r.PerSecond = math.Round(float64(t.requests)/elapsed.Seconds()*10) / 10
	}
	for _, s := range t.samples {
		if s != "" && r.FirstErr == "" {
			r.FirstErr = s
		}
	}
	return r
}

// writeText prints the comparison as a table.
func (s *ratioSummary) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "POST /validate/check, HOTP success: authsrv %s against bare handler %s, %d users, %gs per target in %d slices\n",
		s.Authsrv, s.Bare, s.Users, s.DurationSeconds, s.Rounds)
	if s.Interrupted {
		b.WriteString("interrupted: the last row covers the time until the interrupt\n")
	}
	fmt.Fprintf(&b, "%-8s %-8s %10s %9s %9s %9s %7s %10s\n", "clients", "target", "req/s", "p50 ms", "p99 ms", "max ms", "errors", "cpu us/req")
	for _, r := range s.Rows {
		for _, t := range []struct {
			name string
			t    ratioTarget
		}{{"bare", r.Bare}, {"authsrv", r.Authsrv}} {
			cpu := "-"
			if t.t.CPUPerRequestUS > 0 {
				cpu = strconv.FormatFloat(t.t.CPUPerRequestUS, 'f', 1, 64)
			}
			fmt.Fprintf(&b, "%-8d %-8s %10.1f %9.3f %9.3f %9.3f %7d %10s\n", r.Clients, t.name, t.t.PerSecond,
				t.t.LatencyMS.P50, t.t.LatencyMS.P99, t.t.LatencyMS.Max, t.t.Errors, cpu)
		}
		fmt.Fprintf(&b, "%-8d ratio    %10.3f  (authsrv/bare req/s; p50 %.2fx", r.Clients, r.Ratio, r.P50Ratio)
		if r.CPURatio > 0 {
			fmt.Fprintf(&b, "; bare/authsrv CPU per request %.3f", r.CPURatio)
		}
		b.WriteString(")\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// startBare runs "bin bare -listen 127.0.0.1:0" and waits for its
// "serving on" line.
func startBare(ctx context.Context, bin string) (*serverProc, error) {
	cmd := exec.Command(bin, "bare", "-listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &serverProc{bin: bin, stderr: &tailBuffer{max: 4 << 10}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s bare: %w", bin, err)
	}
	p.cmd, p.pid, p.done = cmd, cmd.Process.Pid, make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingLineRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	timer := time.NewTimer(serverStartTimeout)
	defer timer.Stop()
	select {
	case p.addr = <-addr:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s bare exited during its start (%v): %s", bin, p.waitErr, p.stderr.String())
	case <-timer.C:
		p.kill()
		return nil, fmt.Errorf("%s bare did not serve within %s", bin, serverStartTimeout)
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	}
}
