// Command authbench is a load driver for a running authsrv: it enrols HOTP
// tokens for generated passwd-file users through the admin API, then sends
// POST /validate/check from C concurrent clients for a fixed time and
// reports throughput, latency percentiles and the server's memory.
//
// It talks only to loopback addresses: it is a benchmark for the machine it
// runs on, never a tool to hammer someone else's server. It prints no
// secrets (admin password, JWT, PINs, token keys).
//
// The same command drives privacyIDEA unchanged (its API is the same; where
// /healthz/livez is missing, as in privacyIDEA 3.10, the -skip-setup probe
// falls back to POST /validate/check). A side-by-side comparison, authsrv
// on :8080 and privacyIDEA on :5000, each with an admin "admin" whose
// password is in $AUTHBENCH_ADMIN_PASSWORD and a passwd directory both can
// read (authsrv serve -file-root /srv/bench):
//
//	for u in http://127.0.0.1:8080 http://127.0.0.1:5000; do authbench -url $u -users 1000 -clients 32 -duration 30s -passwd-dir /srv/bench -json; done
//
// "authbench scale -sizes 1k,100k,1M -out FILE.md" is the scale benchmark:
// per size it loads N users and N tokens through the library into a new
// data directory, starts the binary on it and writes the figures (see
// scale.go and "authbench scale -h").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1 // setup failed, or the load saw errors
	exitUsage       = 2
	exitInterrupted = 130
)

// Load modes.
const (
	modeValid = "valid" // fresh valid HOTP values, tokens without PIN
	modeWrong = "wrong" // right PIN, wrong OTP: every answer must be false
	modePIN   = "pin"   // PIN followed by a valid HOTP value
)

// Environment variables for the secrets, so they stay out of ps output.
const (
	envAdminPassword = "AUTHBENCH_ADMIN_PASSWORD"
	envPIN           = "AUTHBENCH_PIN"
)

const usageText = `usage: authbench [flags]

Drives a running authsrv on a loopback address: sets up a passwd resolver,
a realm and one HOTP token per user through the admin API, then sends
POST /validate/check from -clients goroutines for -duration and prints
requests/s, latency percentiles and (with -pid) the server's memory.

The admin password comes from -password or $AUTHBENCH_ADMIN_PASSWORD (the
environment keeps it out of ps); the PIN from -pin or $AUTHBENCH_PIN.
-setup-only and -skip-setup need -state FILE, where setup keeps the token
keys and the load keeps the HOTP counters (mode 0600; it holds secrets).
The exit status is 1 when setup fails or any request failed, 130 when
interrupted.

"authbench catalogue -row ROW -server PATH" runs a row of the reliability
catalogue against a server it starts itself ("authbench catalogue -h");
"authbench scale -sizes 1k,100k,1M -out FILE.md" the scale benchmark.
"authbench ratio -server PATH" compares /validate/check with a bare Go
handler ("authbench bare") under the same load ("authbench ratio -h").
"authbench radius" sends RADIUS Access-Requests; "authbench radius
-compare -server PATH" measures the built-in RADIUS server against
FreeRADIUS + rlm_perl + HTTP in one run ("authbench radius -h").

flags:
`

// config is the parsed command line.
type config struct {
	base         *url.URL
	spread       []*url.URL // more nodes that share base's data (-spread)
	admin        string
	password     string
	users        int
	clients      int
	duration     time.Duration
	kdfFor       time.Duration
	kdfRounds    int
	mode         string
	pin          string
	realm        string
	prefix       string
	setupOnly    bool
	skipSetup    bool
	pid          int
	json         bool
	state        string
	passwdDir    string
	setupWorkers int
	timeout      time.Duration

	usersSet  bool // -users given explicitly
	realmSet  bool
	prefixSet bool
}

// prefixRe is what a serial may contain (privacyIDEA's serial rule), so
// every <prefix>NNNN is a valid serial and <prefix>userNNNN a safe login.
var prefixRe = regexp.MustCompile(`^[0-9A-Za-z_-]+$`)

// nameRe is the server's rule for realm and resolver names.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// maxUsers bounds -users: the passwd file and the state stay small.
const maxUsers = 1_000_000

// parseFlags reads args into a config; the error is ready to print.
func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (*config, error) {
	fs := flag.NewFlagSet("authbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	c := &config{}
	rawURL := fs.String("url", "http://127.0.0.1:8080", "base URL of the server (loopback only)")
	rawSpread := fs.String("spread", "", "comma-separated base URLs of more nodes that share -url's data (one database): the load sends its /validate/check requests round robin over -url and these; setup goes to -url only")
	fs.StringVar(&c.admin, "admin", "admin", "admin user name for setup")
	fs.StringVar(&c.password, "password", "", "admin password (prefer $"+envAdminPassword+")")
	fs.IntVar(&c.users, "users", 100, "number of users, one HOTP token each")
	fs.IntVar(&c.clients, "clients", 8, "concurrent clients (goroutines and connections)")
	fs.DurationVar(&c.duration, "duration", 30*time.Second, "how long the load runs")
	fs.DurationVar(&c.kdfFor, "kdf-alone", 0, "hash PINs (Argon2id, the server's default parameters) on every CPU for this long, in slices between slices of the load, and report the rate, the bound of modes pin and wrong")
	fs.IntVar(&c.kdfRounds, "kdf-rounds", 5, "with -kdf-alone: how many alternating slices of load and hashing, so that a change of the machine's speed during the run affects both alike")
	fs.StringVar(&c.mode, "mode", modeValid, "valid (fresh OTPs, no PIN), wrong (right PIN, wrong OTP) or pin (PIN + fresh OTP)")
	fs.StringVar(&c.pin, "pin", "", "token PIN for modes pin and wrong (prefer $"+envPIN+")")
	fs.StringVar(&c.realm, "realm", "bench", "realm to create and authenticate in")
	fs.StringVar(&c.prefix, "prefix", "bench", "prefix of user logins (<prefix>userNNNN) and serials (<prefix>NNNN)")
	fs.BoolVar(&c.setupOnly, "setup-only", false, "run the setup, write -state and stop")
	fs.BoolVar(&c.skipSetup, "skip-setup", false, "skip the setup and take users, keys and counters from -state")
	fs.IntVar(&c.pid, "pid", 0, "server process id: report its VmRSS and VmHWM from /proc")
	fs.BoolVar(&c.json, "json", false, "print the summary as one JSON object")
	fs.StringVar(&c.state, "state", "", "file for token keys and counters (needed by -setup-only and -skip-setup)")
	fs.StringVar(&c.passwdDir, "passwd-dir", "", "directory for the passwd file the server reads (default: a new temporary directory, kept)")
	fs.IntVar(&c.setupWorkers, "setup-workers", 4, "parallel requests during setup")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "timeout of each request")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "users":
			c.usersSet = true
		case "realm":
			c.realmSet = true
		case "prefix":
			c.prefixSet = true
		}
	})
	if c.password == "" {
		c.password = getenv(envAdminPassword)
	}
	if c.pin == "" {
		c.pin = getenv(envPIN)
	}
	c.realm = strings.ToLower(c.realm)

	var errs []error
	base, err := parseBaseURL(*rawURL)
	if err != nil {
		errs = append(errs, err)
	}
	c.base = base
	for raw := range strings.SplitSeq(*rawSpread, ",") {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		u, err := parseBaseURL(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("-spread: %w", err))
			continue
		}
		c.spread = append(c.spread, u)
	}
	switch c.mode {
	case modeValid, modeWrong:
	case modePIN:
		if c.pin == "" {
			errs = append(errs, fmt.Errorf("-mode pin needs a PIN: set -pin or $%s", envPIN))
		}
	default:
		errs = append(errs, fmt.Errorf("-mode %q: want valid, wrong or pin", c.mode))
	}
	if c.mode == modeValid && c.pin != "" {
		errs = append(errs, errors.New("-mode valid uses tokens without a PIN: drop -pin (or use -mode pin)"))
	}
	if strings.ContainsAny(c.pin, "\x00\r\n") {
		errs = append(errs, errors.New("the PIN contains a control character"))
	}
	if c.users < 1 || c.users > maxUsers {
		errs = append(errs, fmt.Errorf("-users %d: want 1 to %d", c.users, maxUsers))
	}
	if c.clients < 1 {
		errs = append(errs, fmt.Errorf("-clients %d: want at least 1", c.clients))
	}
	if c.kdfRounds < 1 || c.kdfRounds > 1000 {
		errs = append(errs, fmt.Errorf("-kdf-rounds %d: want 1 to 1000", c.kdfRounds))
	}
	if c.duration <= 0 && !c.setupOnly {
		errs = append(errs, fmt.Errorf("-duration %s: want more than 0", c.duration))
	}
	if c.timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout %s: want more than 0", c.timeout))
	}
	if c.setupWorkers < 1 {
		errs = append(errs, fmt.Errorf("-setup-workers %d: want at least 1", c.setupWorkers))
	}
	if c.pid < 0 {
		errs = append(errs, fmt.Errorf("-pid %d: want a process id", c.pid))
	}
	if !prefixRe.MatchString(c.prefix) {
		errs = append(errs, fmt.Errorf("-prefix %q: use letters, digits, '-' and '_'", c.prefix))
	}
	if !nameRe.MatchString(c.realm) {
		errs = append(errs, fmt.Errorf("-realm %q: use letters, digits, '.', '-' and '_'", c.realm))
	}
	if c.setupOnly && c.skipSetup {
		errs = append(errs, errors.New("-setup-only and -skip-setup exclude each other"))
	}
	if (c.setupOnly || c.skipSetup) && c.state == "" {
		errs = append(errs, errors.New("-setup-only and -skip-setup need -state FILE: the token keys must survive between runs"))
	}
	if !c.skipSetup {
		if c.admin == "" {
			errs = append(errs, errors.New("-admin is empty"))
		}
		if c.password == "" {
			errs = append(errs, fmt.Errorf("the admin password is missing: set $%s or -password", envAdminPassword))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// parseBaseURL checks -url: http or https, a loopback host (an IP literal
// on loopback, or "localhost"), no credentials, query or fragment. The
// returned URL has no trailing slash in its path.
func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("-url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("-url %q: the scheme must be http or https", raw)
	}
	if u.User != nil {
		return nil, errors.New("-url: credentials in the URL are not allowed; use -admin and $" + envAdminPassword)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("-url %q: give the base URL only, without query or fragment", raw)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("-url %q: no host", raw)
	}
	if !isLoopbackHost(host) {
		return nil, fmt.Errorf("-url %q: host %q is not a loopback address; authbench only drives a server on this machine (127.0.0.0/8, ::1 or localhost)", raw, host)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("-url %q: bad port %q", raw, p)
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP
// literal. Names other than localhost are refused: what they resolve to
// may change. The dialer checks the address it really connects to too.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.EqualFold(host, "localhost.") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // IPv6 zone
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// run is the command; main only wires the process to it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "catalogue" {
		return runCatalogue(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "bare" {
		return runBare(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "ratio" {
		return runRatio(ctx, args[1:], stdout, stderr, getenv)
	}
	if len(args) > 0 && args[0] == "scale" {
		return runScale(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "radius" {
		return runRadius(ctx, args[1:], stdout, stderr, getenv)
	}
	cfg, err := parseFlags(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "authbench: %v\n", err)
		return exitUsage
	}
	b := newBench(cfg, stderr)
	defer b.close()
	code, err := b.run(ctx, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "authbench: %v\n", err)
	}
	return code
}
