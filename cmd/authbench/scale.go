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
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The "scale" subcommand is the repeatable scale benchmark: for each size
// N it loads N passwd users and N HOTP tokens (token i owned by user i)
// into a fresh data directory through the library, starts the authsrv
// binary on it and measures what an operator of a large installation
// sees: startup to ready, the first user lookup against the thousandth,
// the admin token list queries, a user search, validate under load,
// memory and the store's size, and an import through /token/load. Every
// answer is checked (status, count, page shape), so a wrong answer fails
// the figure instead of counting as fast.

const scaleUsage = `usage: authbench scale -sizes 1k,100k,1M -out FILE.md [flags]

For each size N: loads N passwd users and N HOTP tokens (token i owned by
user i, realm "scale") into a new data directory through the library
(benchmark only: keys derived from the serials, no audit of the load),
starts the authsrv binary on it (built once with "go build" unless -server
is given), measures, stops it and removes the directory (unless -keep).
Figures go to FILE.md (a table, one column per size) and FILE.json, both
rewritten after every size. The exit status is 1 when a figure's answers
were wrong or a step failed (the figures say which).

flags:
`

// scaleConfig is the scale subcommand's command line.
type scaleConfig struct {
	sizes       []int
	out         string
	jsonOut     string
	server      string
	serverArgs  []string
	workDir     string
	keep        bool
	reps        int
	budget      time.Duration
	validateFor time.Duration
	clients     []int
	workingSet  int
	lookups     int
	importN     int
	importFile  int
	timeout     time.Duration
	readyWait   time.Duration
	settleMax   time.Duration
	sample      time.Duration
	load        loadOptions
	args        []string
}

// maxScaleSize keeps logins and serials at seven digits.
const maxScaleSize = 9_999_999

func parseScale(args []string, stderr io.Writer) (*scaleConfig, error) {
	fs := flag.NewFlagSet("authbench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, scaleUsage)
		fs.PrintDefaults()
	}
	c := &scaleConfig{args: args}
	var extra stringList
	sizes := fs.String("sizes", "1k,100k,1M", "comma-separated sizes (users = tokens); k and M suffixes")
	clients := fs.String("clients", "8,32", "comma-separated client counts of the validate load")
	fs.StringVar(&c.out, "out", "", "markdown file for the figures (FILE.json gets them as JSON)")
	fs.StringVar(&c.server, "server", "", "the authsrv binary (default: go build ./cmd/authsrv once, from the current module)")
	fs.Var(&extra, "server-arg", "extra argument for \"authsrv serve\" (repeatable), e.g. -server-arg=-memory-limit=300MiB")
	fs.StringVar(&c.workDir, "dir", "", "directory for the data directories (default: a new temporary one)")
	fs.BoolVar(&c.keep, "keep", false, "keep each size's data directory")
	fs.IntVar(&c.reps, "reps", 5, "calls of each list query and of the user search")
	fs.DurationVar(&c.budget, "query-budget", 60*time.Second, "stop repeating a query once its calls took this long (at least one call)")
	fs.DurationVar(&c.validateFor, "validate-duration", 20*time.Second, "how long each validate load runs")
	fs.IntVar(&c.workingSet, "working-set", 10000, "users the validate load cycles through, spread evenly over the N (all N when fewer)")
	fs.IntVar(&c.lookups, "lookups", 1000, "validate requests by user right after the start, each a different user; the first and the last are reported")
	fs.IntVar(&c.importN, "import", 100000, "tokens imported through POST /token/load after the other measures (0: none)")
	fs.IntVar(&c.importFile, "import-file", 10000, "tokens per /token/load file (the admin body limit is 1 MiB, about 17,000 lines)")
	fs.DurationVar(&c.timeout, "timeout", 90*time.Second, "timeout of each request (the server's write timeout is 60 s)")
	fs.DurationVar(&c.readyWait, "ready-timeout", 10*time.Minute, "how long the server may take to report ready")
	fs.DurationVar(&c.settleMax, "settle", 5*time.Minute, "before the user search, each validate load and the import: wait at most this long for the server to be idle (below a tenth of a core for a second; a query a client gave up on may still run)")
	fs.DurationVar(&c.sample, "sample", 200*time.Millisecond, "interval of the memory samples")
	fs.IntVar(&c.load.importBatch, "load-batch", 2000, "loader: tokens per import transaction")
	fs.IntVar(&c.load.importWorkers, "load-workers", 2, "loader: parallel import batches")
	fs.IntVar(&c.load.assignWorkers, "assign-workers", 256, "loader: parallel assignments (the store commits them in groups)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c.serverArgs = extra
	var errs []error
	var err error
	if c.sizes, err = parseSizes(*sizes); err != nil {
		errs = append(errs, err)
	}
	if c.clients, err = parseInts(*clients); err != nil {
		errs = append(errs, fmt.Errorf("-clients: %w", err))
	}
	if c.out == "" {
		errs = append(errs, errors.New("-out is missing: the markdown file for the figures"))
	} else {
		c.jsonOut = strings.TrimSuffix(c.out, filepath.Ext(c.out)) + ".json"
		if c.jsonOut == c.out {
			c.jsonOut = c.out + ".json"
		}
	}
	if c.server != "" {
		if fi, err := os.Stat(c.server); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			errs = append(errs, fmt.Errorf("-server %q: not an executable file", c.server))
		}
	}
	if c.reps < 1 || c.workingSet < 1 || c.lookups < 1 || c.importN < 0 || c.importFile < 1 {
		errs = append(errs, errors.New("-reps, -working-set, -lookups and -import-file want at least 1, -import at least 0"))
	}
	if c.budget <= 0 || c.validateFor <= 0 || c.timeout <= 0 || c.readyWait <= 0 || c.sample <= 0 || c.settleMax <= 0 {
		errs = append(errs, errors.New("-query-budget, -validate-duration, -timeout, -ready-timeout, -settle and -sample want more than 0"))
	}
	if c.load.importBatch < 1 || c.load.importWorkers < 1 || c.load.assignWorkers < 1 {
		errs = append(errs, errors.New("-load-batch, -load-workers and -assign-workers want at least 1"))
	}
	return c, errors.Join(errs...)
}

// parseSizes reads "1k,100k,1M".
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"), strings.HasSuffix(f, "K"):
			mult, f = 1000, f[:len(f)-1]
		case strings.HasSuffix(f, "M"), strings.HasSuffix(f, "m"):
			mult, f = 1_000_000, f[:len(f)-1]
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n*mult > maxScaleSize {
			return nil, fmt.Errorf("-sizes: %q: want a number from 1 to %d, with k or M as suffix", s, maxScaleSize)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive numbers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseScale(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "authbench scale: %v\n", err)
		return exitUsage
	}
	rep, err := scaleRun(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "authbench scale: %v\n", err)
	}
	if rep != nil {
		fmt.Fprintf(stdout, "figures in %s and %s\n", cfg.out, cfg.jsonOut)
	}
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case err != nil:
		return exitFailed
	case rep.failed():
		for _, s := range rep.Sizes {
			for _, e := range s.Errors {
				fmt.Fprintf(stderr, "authbench scale: N=%d: %s\n", s.N, e)
			}
		}
		return exitFailed
	}
	return exitOK
}

// scaleRun builds the binary when needed and runs every size, writing the
// report after each.
func scaleRun(ctx context.Context, cfg *scaleConfig, log io.Writer) (*scaleReport, error) {
	work := cfg.workDir
	if work == "" {
		d, err := os.MkdirTemp("", "authbench-scale-")
		if err != nil {
			return nil, err
		}
		work = d
		if !cfg.keep {
			defer os.RemoveAll(d)
		}
	} else if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	bin := cfg.server
	if bin == "" {
		fmt.Fprintln(log, "scale: building cmd/authsrv")
		var err error
		if bin, err = buildAuthsrv(ctx, work); err != nil {
			return nil, err
		}
	}
	rep := newScaleReport(cfg, bin)
	if err := rep.write(cfg); err != nil {
		return nil, err
	}
	for _, n := range cfg.sizes {
		if ctx.Err() != nil {
			break
		}
		r := &sizeRun{cfg: cfg, n: n, bin: bin, log: log, res: &sizeResult{N: n}}
		r.dataDir = filepath.Join(work, "n"+strconv.Itoa(n), "data")
		rep.Sizes = append(rep.Sizes, r.res)
		r.run(ctx)
		if !cfg.keep && r.created {
			_ = os.RemoveAll(filepath.Dir(r.dataDir))
		}
		if err := rep.write(cfg); err != nil {
			return rep, err
		}
		fmt.Fprintf(log, "scale: N=%d done in %.0fs\n", n, r.res.WallSeconds)
	}
	return rep, ctx.Err()
}

// buildAuthsrv runs "go build" for cmd/authsrv into dir.
func buildAuthsrv(ctx context.Context, dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "authsrv")
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/authsrv/authsrv/cmd/authsrv").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cmd/authsrv (run authbench scale inside the module, or give -server): %v\n%s", err, out)
	}
	return bin, nil
}

// sizeRun is the run of one size.
type sizeRun struct {
	cfg     *scaleConfig
	n       int
	bin     string
	log     io.Writer
	dataDir string
	created bool // the data directory is ours to remove
	res     *sizeResult

	srv      *serverProc
	hc       *http.Client
	base     string
	api      *apiClient
	counters []uint64 // next HOTP counter of user i (index i, from 1)
	mem      *memSampler
}

func (r *sizeRun) logf(format string, a ...any) {
	fmt.Fprintf(r.log, "scale: N=%d: "+format+"\n", append([]any{r.n}, a...)...)
}

// fail records a step that failed; the run goes on with the next one
// where it can.
func (r *sizeRun) fail(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.res.Errors = append(r.res.Errors, msg)
	r.logf("FAILED: %s", msg)
}

func (r *sizeRun) run(ctx context.Context) {
	began := time.Now()
	defer func() { r.res.WallSeconds = round3(time.Since(began).Seconds()) }()
	if _, err := os.Stat(r.dataDir); err == nil {
		r.fail("%s exists already: give an empty -dir", r.dataDir)
		return
	}
	r.created = true
	r.logf("loading %d users and tokens into %s", r.n, r.dataDir)
	lo := r.cfg.load
	lo.log = r.log
	ls, err := scaleLoad(ctx, r.dataDir, r.n, lo)
	if err != nil {
		r.fail("load: %v", err)
		return
	}
	r.res.Load = ls
	r.logf("loaded in %.1fs (import %.1fs, assign %.1fs), store %s", ls.TotalSeconds, ls.ImportSeconds, ls.AssignSeconds, mib(ls.DataBytes>>10))
	r.counters = make([]uint64, r.n+1)

	maxConns := 4
	for _, c := range r.cfg.clients {
		maxConns = max(maxConns, c+2)
	}
	r.hc = newHTTPClient(maxConns)
	defer r.hc.CloseIdleConnections()

	t0 := time.Now()
	srv, err := startServer(ctx, r.bin, r.dataDir, r.cfg.serverArgs)
	if err != nil {
		r.fail("start: %v", err)
		return
	}
	r.srv = srv
	r.base = "http://" + srv.addr
	r.mem = startMemSampler(srv.pid, r.cfg.sample)
	defer func() {
		r.mem.stop()
		r.res.Memory = r.mem.result()
		if fi, err := os.Stat(filepath.Join(r.dataDir, "authsrv.db")); err == nil {
			r.res.DataBytesEnd = fi.Size()
		}
	}()
	defer func() {
		if r.srv.alive() {
			if err := r.srv.stop(); err != nil {
				r.fail("stopping the server: %v", err)
			}
		}
	}()
	if err := r.waitReady(ctx); err != nil {
		r.fail("%v", err)
		return
	}
	r.res.StartToReadySeconds = round3(time.Since(t0).Seconds())
	r.logf("ready %.2fs after the start", r.res.StartToReadySeconds)
	r.mem.phase("idle")
	sleep(ctx, 3*r.cfg.sample)

	r.mem.phase("lookups")
	r.lookups(ctx)
	if srv.password == "" {
		r.fail("the server printed no first admin password")
		return
	}
	if err := r.login(ctx); err != nil {
		r.fail("%v", err)
		return
	}
	r.mem.phase("lists")
	r.listQueries(ctx)
	r.settle(ctx, "the user search")
	r.mem.phase("users")
	r.userSearch(ctx)
	for _, c := range r.cfg.clients {
		r.settle(ctx, fmt.Sprintf("validate at %d clients", c))
		r.mem.phase("validate")
		r.validate(ctx, c)
	}
	if r.cfg.importN > 0 {
		r.settle(ctx, "the import")
		r.mem.phase("import")
		r.importCSV(ctx)
	}
	r.mem.phase("idle_end")
	sleep(ctx, 3*r.cfg.sample)
}

// waitReady polls /healthz/readyz until it answers 200.
func (r *sizeRun) waitReady(ctx context.Context) error {
	api := &apiClient{base: r.base, hc: r.hc, timeout: 5 * time.Second}
	deadline := time.Now().Add(r.cfg.readyWait)
	for {
		ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := api.getRaw(ctx2, "/healthz/readyz")
		cancel()
		if err == nil {
			return nil
		}
		if !r.srv.alive() {
			return fmt.Errorf("the server exited before it was ready: %s", r.srv.stderr.String())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not ready %s after the start: %v", r.cfg.readyWait, err)
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// login makes r.api an admin client with the first admin's password.
func (r *sizeRun) login(ctx context.Context) error {
	api := &apiClient{base: r.base, hc: r.hc, timeout: r.cfg.timeout}
	env, err := api.post(ctx, "/auth", url.Values{"username": {"admin"}, "password": {r.srv.password}})
	if err != nil {
		return fmt.Errorf("admin login: %w", err)
	}
	var v struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(env.Result.Value, &v); err != nil || v.Token == "" {
		return errors.New("admin login: the answer has no token")
	}
	api.jwt = v.Token
	r.api = api
	return nil
}
