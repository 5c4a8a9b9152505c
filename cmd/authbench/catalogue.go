package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The "catalogue" subcommand runs rows of the reliability catalogue
// (spec reliability.md section 5) against an authsrv binary it starts
// itself on a loopback port with a fresh data directory: it knows the
// process id (for /proc), the first admin's password and the store file.
// Each row checks its row's properties and fails with a message naming
// the property that failed.

const catalogueUsage = `usage: authbench catalogue -row ROW -server PATH [flags]

Starts PATH ("authsrv") with a new data directory on 127.0.0.1, sets up
what the row needs through the admin API, runs it and checks the row's
properties (reliability.md section 5). Rows: L1, L4, L5, L6, L7, F2, S4.
-bounds catalogue applies the catalogue's bounds; -bounds ci keeps the
exact properties (counts, statuses, one success per challenge, closed
connections) and is lenient on latency, memory and timing, for short runs
on a busy machine. The figures are printed and, with -out, appended to a
file as one JSON object per row. The exit status is 1 when a property
fails.

flags:
`

// catConfig is the catalogue subcommand's command line.
type catConfig struct {
	row        string
	server     string
	serverArgs []string
	dataDir    string
	out        string
	bounds     string
	duration   time.Duration
	warmup     time.Duration
	warmupSet  bool // L6 defaults to a fifth of -duration, 10 s to 10 min
	clients    int
	timeout    time.Duration

	// L5
	l5Workers int
	// L6
	rateShare float64
	probe     time.Duration
	sample    time.Duration
	csv       string
	// auditMaxEntries and auditCleanup are the audit retention the
	// server runs with in L6 (0 entries: none)
	auditMaxEntries int64
	auditCleanup    time.Duration
	// L7
	slow              int
	readHeaderTimeout time.Duration
	// F2
	cycles     int
	f2Workers  int
	killMin    time.Duration
	killMax    time.Duration
	verifyOnly bool
	// S4
	s4Rounds int
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func parseCatalogue(args []string, stderr io.Writer) (*catConfig, error) {
	fs := flag.NewFlagSet("authbench catalogue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, catalogueUsage)
		fs.PrintDefaults()
	}
	c := &catConfig{}
	var extra stringList
	fs.StringVar(&c.row, "row", "", "catalogue row: L1, L4, L5, L6, L7, F2 or S4")
	fs.StringVar(&c.server, "server", "", "the authsrv binary to start")
	fs.Var(&extra, "server-arg", "extra argument for \"authsrv serve\" (repeatable), e.g. -server-arg=-allow-dial=127.0.0.0/8")
	fs.StringVar(&c.dataDir, "data-dir", "", "data directory for the server (default: a new temporary directory, removed afterwards)")
	fs.StringVar(&c.out, "out", "", "append the row's figures as one JSON line to this file")
	fs.StringVar(&c.bounds, "bounds", "catalogue", "catalogue (the catalogue's bounds) or ci (exact properties, lenient latency and memory)")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "how long each load phase runs (L6: the soak)")
	fs.DurationVar(&c.warmup, "warmup", 5*time.Second, "load before the baseline is sampled (L1, L4, L7); L6: samples before it are left out of the slopes (default: a fifth of -duration, 10s to 10m)")
	fs.IntVar(&c.clients, "clients", 50, "validate clients (L1, L6, L7; L4 uses 45)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "timeout of each request")
	fs.IntVar(&c.l5Workers, "l5-workers", 20, "L5: workers, one user and e-mail token each")
	fs.Float64Var(&c.rateShare, "rate-share", 0.3, "L6: share of the measured maximum rate the soak sends")
	fs.DurationVar(&c.probe, "probe", 10*time.Second, "L6: how long the maximum rate is measured")
	fs.DurationVar(&c.sample, "sample", 10*time.Second, "L6: interval between samples of RSS, descriptors, threads and store size")
	fs.StringVar(&c.csv, "csv", "", "L6: write the samples to this CSV file")
	fs.Int64Var(&c.auditMaxEntries, "audit-max-entries", 50000, "L6: the server keeps the newest N audit entries (authsrv serve -audit-max-entries); the row checks that the retention ran (0: no count limit, so every entry of the run is kept and counted)")
	fs.DurationVar(&c.auditCleanup, "audit-cleanup-interval", 10*time.Second, "L6: how often the server's audit retention runs")
	fs.IntVar(&c.slow, "slow", 500, "L7: slow connections held open alongside the load")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", 5*time.Second, "L7: the server's ReadHeaderTimeout")
	fs.IntVar(&c.cycles, "cycles", 3, "F2: kill -9 cycles")
	fs.IntVar(&c.f2Workers, "f2-workers", 3, "F2: parallel admin writers")
	fs.DurationVar(&c.killMin, "kill-min", 500*time.Millisecond, "F2: earliest kill after the writers start")
	fs.DurationVar(&c.killMax, "kill-max", 3*time.Second, "F2: latest kill after the writers start")
	fs.IntVar(&c.s4Rounds, "s4-rounds", 200, "S4: requests per refusal path")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c.serverArgs = extra
	fs.Visit(func(f *flag.Flag) { c.warmupSet = c.warmupSet || f.Name == "warmup" })
	c.row = strings.ToUpper(c.row)
	var errs []error
	switch c.row {
	case "L1", "L4", "L5", "L6", "L7", "F2", "S4":
	case "":
		errs = append(errs, errors.New("-row is missing: L1, L4, L5, L6, L7, F2 or S4"))
	default:
		errs = append(errs, fmt.Errorf("-row %q: want L1, L4, L5, L6, L7, F2 or S4", c.row))
	}
	if c.server == "" {
		errs = append(errs, errors.New("-server is missing: the path of the authsrv binary"))
	} else if fi, err := os.Stat(c.server); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		errs = append(errs, fmt.Errorf("-server %q: not an executable file", c.server))
	}
	if c.bounds != "catalogue" && c.bounds != "ci" {
		errs = append(errs, fmt.Errorf("-bounds %q: want catalogue or ci", c.bounds))
	}
	if c.duration <= 0 {
		errs = append(errs, fmt.Errorf("-duration %s: want more than 0", c.duration))
	}
	if c.warmup < 0 || c.timeout <= 0 || c.probe <= 0 || c.sample <= 0 || c.readHeaderTimeout <= 0 {
		errs = append(errs, errors.New("-warmup must not be negative; -timeout, -probe, -sample and -read-header-timeout must be more than 0"))
	}
	if c.clients < 1 || c.l5Workers < 1 || c.f2Workers < 1 || c.cycles < 1 || c.s4Rounds < 1 || c.slow < 0 {
		errs = append(errs, errors.New("-clients, -l5-workers, -f2-workers, -cycles and -s4-rounds want at least 1, -slow at least 0"))
	}
	if c.rateShare <= 0 || c.rateShare > 1 {
		errs = append(errs, fmt.Errorf("-rate-share %g: want more than 0 and at most 1", c.rateShare))
	}
	if c.auditMaxEntries < 0 || c.auditCleanup <= 0 {
		errs = append(errs, fmt.Errorf("-audit-max-entries %d, -audit-cleanup-interval %s: want at least 0 and more than 0", c.auditMaxEntries, c.auditCleanup))
	}
	if c.killMin <= 0 || c.killMax < c.killMin {
		errs = append(errs, fmt.Errorf("-kill-min %s, -kill-max %s: want 0 < min <= max", c.killMin, c.killMax))
	}
	return c, errors.Join(errs...)
}

// bounds are the limits a row is held to.
type bounds struct {
	L1P99       time.Duration // 0: not checked
	RSSGrowth   float64       // RSS after ≤ (1+RSSGrowth) × before
	FDSlack     int64         // descriptors after ≤ baseline + FDSlack
	P99Ratio    float64       // L4, L7: p99 under stress ≤ ratio × baseline p99
	CloseSlack  time.Duration // L7: slow connection closed within ReadHeaderTimeout + slack
	SlopeRSS    float64       // L6: fitted rise of RSS over the run ≤ this share of its start
	SlopeFDs    float64       // L6: fitted rise of descriptors over the run
	SlopeThread float64       // L6: fitted rise of threads over the run
	SlopeDB     float64       // L6 with audit retention: fitted rise of the store's file over the run ≤ this share of its start
	S4Spread    float64       // S4: how far the refusal paths' relative medians may differ
}

func boundsFor(name string) bounds {
	if name == "ci" {
		return bounds{RSSGrowth: 1.0, FDSlack: 8, P99Ratio: 50, CloseSlack: 10 * time.Second,
			SlopeRSS: 0.5, SlopeFDs: 10, SlopeThread: 10, SlopeDB: 0.5, S4Spread: 0.6}
	}
	return bounds{L1P99: 50 * time.Millisecond, RSSGrowth: 0.2, FDSlack: 2, P99Ratio: 2, CloseSlack: 2 * time.Second,
		SlopeRSS: 0.1, SlopeFDs: 3, SlopeThread: 3, SlopeDB: 0.1, S4Spread: 0.1}
}

// rowResult is what a row prints and appends to -out.
type rowResult struct {
	Row      string         `json:"row"`
	Bounds   string         `json:"bounds"`
	Started  time.Time      `json:"started"`
	Passed   bool           `json:"passed"`
	Failures []string       `json:"failures,omitempty"`
	Figures  map[string]any `json:"figures"`
}

func (r *rowResult) fail(format string, a ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, a...))
}

func (r *rowResult) set(k string, v any) { r.Figures[k] = v }

// catalogue is one run of a row.
type catalogue struct {
	cfg    *catConfig
	b      bounds
	log    io.Writer
	hc     *http.Client
	srv    *serverProc
	api    *apiClient
	res    *rowResult
	realm  string
	tmpDir string // removed at the end when we made it
}

func runCatalogue(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseCatalogue(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "authbench catalogue: %v\n", err)
		return exitUsage
	}
	c := &catalogue{cfg: cfg, b: boundsFor(cfg.bounds), log: stderr, realm: "r1",
		res: &rowResult{Row: cfg.row, Bounds: cfg.bounds, Started: time.Now().UTC().Truncate(time.Second), Figures: map[string]any{}}}
	// At most one connection per worker, and two for the admin calls
	// that count and check: new connections opened while others wait to
	// go idle would otherwise raise the server's descriptors during a run.
	conns := cfg.clients
	switch cfg.row {
	case "L5":
		conns = cfg.l5Workers
	case "F2":
		conns = cfg.f2Workers
	}
	c.hc = newHTTPClient(conns + 2)
	c.hc.Transport.(*http.Transport).MaxConnsPerHost = conns + 2
	defer c.hc.CloseIdleConnections()
	if err := c.run(ctx); err != nil {
		c.res.fail("%v", err)
	}
	c.res.Passed = len(c.res.Failures) == 0
	if err := c.report(stdout); err != nil {
		fmt.Fprintf(stderr, "authbench catalogue: %v\n", err)
		return exitFailed
	}
	if ctx.Err() != nil {
		return exitInterrupted
	}
	if !c.res.Passed {
		for _, f := range c.res.Failures {
			fmt.Fprintf(stderr, "authbench catalogue: %s FAILED: %s\n", cfg.row, f)
		}
		return exitFailed
	}
	return exitOK
}

func (c *catalogue) run(ctx context.Context) error {
	dir := c.cfg.dataDir
	if dir == "" {
		d, err := os.MkdirTemp("", "authbench-cat-")
		if err != nil {
			return err
		}
		c.tmpDir = d
		defer os.RemoveAll(d)
		dir = filepath.Join(d, "data")
	}
	c.cfg.dataDir = dir
	fmt.Fprintf(c.log, "%s: starting %s with data in %s\n", c.cfg.row, c.cfg.server, dir)
	args := c.cfg.serverArgs
	if c.cfg.row == "L5" {
		// The row's SMTP sink listens on loopback, which the server's
		// dial policy refuses unless allowed.
		args = append([]string{"-allow-dial=127.0.0.0/8"}, args...)
	}
	if c.cfg.row == "L6" && c.cfg.auditMaxEntries > 0 {
		args = append([]string{fmt.Sprintf("-audit-max-entries=%d", c.cfg.auditMaxEntries), "-audit-cleanup-interval=" + c.cfg.auditCleanup.String()}, args...)
	}
	srv, err := startServer(ctx, c.cfg.server, dir, args)
	if err != nil {
		return err
	}
	c.srv = srv
	defer func() {
		if c.srv.alive() {
			if err := c.srv.stop(); err != nil {
				c.res.fail("stopping the server: %v", err)
			}
		}
	}()
	if srv.password == "" {
		return errors.New("the server printed no first admin password: use an empty -data-dir")
	}
	if err := c.login(ctx); err != nil {
		return err
	}
	switch c.cfg.row {
	case "L1":
		return c.rowL1(ctx)
	case "L4":
		return c.rowL4(ctx)
	case "L5":
		return c.rowL5(ctx)
	case "L6":
		return c.rowL6(ctx)
	case "L7":
		return c.rowL7(ctx)
	case "F2":
		return c.rowF2(ctx)
	case "S4":
		return c.rowS4(ctx)
	}
	return nil
}

// login makes c.api an admin client of the current server process.
func (c *catalogue) login(ctx context.Context) error {
	c.api = &apiClient{base: "http://" + c.srv.addr, hc: c.hc, timeout: c.cfg.timeout}
	env, err := c.api.post(ctx, "/auth", url.Values{"username": {"admin"}, "password": {c.srv.password}})
	if err != nil {
		return fmt.Errorf("admin login: %w", err)
	}
	var v struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(env.Result.Value, &v); err != nil || v.Token == "" {
		return errors.New("admin login: the answer has no token")
	}
	c.api.jwt = v.Token
	return nil
}

// report prints the result and appends it to -out.
func (c *catalogue) report(stdout io.Writer) error {
	line, err := json.Marshal(c.res)
	if err != nil {
		return err
	}
	verdict := "PASSED"
	if !c.res.Passed {
		verdict = "FAILED"
	}
	fmt.Fprintf(stdout, "%s (%s bounds): %s\n%s\n", c.res.Row, c.res.Bounds, verdict, line)
	if c.cfg.out == "" {
		return nil
	}
	f, err := os.OpenFile(c.cfg.out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sample reads /proc for the server.
func (c *catalogue) sample() (procSample, error) {
	return sampleProc(c.srv.pid, c.cfg.dataDir)
}

// get sends a GET with the admin JWT and returns the envelope.
func (a *apiClient) get(ctx context.Context, path string) (*envelope, error) {
	return a.do(ctx, http.MethodGet, path, nil)
}

// do sends method path with an optional form body.
func (a *apiClient) do(ctx context.Context, method, path string, form url.Values) (*envelope, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(encodeForm(form))
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("User-Agent", userAgent)
	if a.jwt != "" {
		req.Header.Set("Authorization", a.jwt)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return decodeEnvelope(resp.StatusCode, b)
}

// count reads result.value.count of a list answer.
func count(env *envelope) (int64, error) {
	var v struct {
		Count *int64 `json:"count"`
	}
	if err := json.Unmarshal(env.Result.Value, &v); err != nil || v.Count == nil {
		return 0, fmt.Errorf("the answer has no count: %s", snippet(env.Result.Value))
	}
	return *v.Count, nil
}

// getRaw sends a GET without reading an envelope (the health probes
// answer bare JSON) and fails unless the answer is HTTP 200.
func (a *apiClient) getRaw(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(b))
	}
	return b, nil
}
