// Command authsrv runs the authsrv server and manages its data directory.
// It only maps flags (and AUTHSRV_* environment variables) to library
// options; everything else lives in the library.
package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/resolver/builtin"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/store/postgres"
	"github.com/authsrv/authsrv/subscription"
	"github.com/authsrv/authsrv/token"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// env is how the command reads the environment (injected for tests).
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// captureFlags, when set, receives the FlagSet parse is given, and
	// parse stops (serveFlagSet: the keys of a configuration file).
	captureFlags func(*flag.FlagSet)
	// stores are the -store databases the command opened; run closes
	// them after the command (and its server) ended.
	stores []store.Store
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	defer e.closeStores()
	cmd := "serve"
	if len(args) > 0 && (!strings.HasPrefix(args[0], "-") || isHelp(args[0])) {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = e.serve(args)
	case "admin":
		err = e.admin(args)
	case "api":
		err = e.apiCmd(args)
	case "jwt":
		err = e.jwtCmd(args)
	case "backup":
		err = e.backup(args)
	case "restore":
		err = e.restore(args)
	case "audit":
		err = e.auditCmd(args)
	case "compact":
		err = e.compact(args)
	case "ssh-keys":
		err = e.sshKeys(args)
	case "config":
		err = e.configCmd(args)
	case "import":
		err = e.importCmd(args)
	case "store":
		err = e.storeCmd(args)
	case "version":
		fmt.Fprintf(stdout, "%s %s (%s)\n", authsrv.Product, authsrv.Version, runtime.Version())
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "authsrv: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	if errors.Is(err, errProblems) {
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "authsrv %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

// errProblems means the command ran and found problems (exit code 1).
var errProblems = errors.New("problems found")

// common holds the flags every command shares.
type common struct {
	dataDir      string
	storeURL     string        // -store: "" for the data directory's bbolt file
	storeTimeout time.Duration // -store-connect-timeout
	logLevel     string
	logFormat    string
	nodeName     string
	superusers   string
	kdfBudget    int64
	openTimeout  time.Duration
	smsScripts   string
	evScripts    string
	spoolDir     string
	publicURL    string
	fileRoots    rootList // serve's -file-root; empty: the defaults
	allowDial    dialList // serve's -allow-dial; empty: public addresses only
}

// DefaultFileRoot is the system directory a passwd file may lie in when no
// -file-root is given (besides the data directory's files subfolder).
const DefaultFileRoot = "/etc/authsrv"

// rootList is the repeatable -file-root flag. A value may hold several
// directories separated by a colon (as in PATH), which is how
// AUTHSRV_FILE_ROOT names more than one.
type rootList []string

func (r *rootList) String() string { return strings.Join(*r, string(os.PathListSeparator)) }

func (r *rootList) Set(v string) error {
	for _, dir := range filepath.SplitList(v) {
		if dir == "" {
			return errors.New("an empty directory name")
		}
		*r = append(*r, dir)
	}
	return nil
}

// roots returns the absolute directories a passwd file may lie in: the
// -file-root flags, else DefaultFileRoot and the data directory's files
// subfolder.
func (c *common) roots() ([]string, error) {
	dirs := []string(c.fileRoots)
	if len(dirs) == 0 {
		dirs = []string{DefaultFileRoot, filepath.Join(c.dataDir, authsrv.FilesDir)}
	}
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("-file-root %s: %w", d, err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// checkRoots refuses a -file-root that does not exist or is not a
// directory: a typo would otherwise confine every passwd file to nothing.
func (c *common) checkRoots() error {
	var errs []error
	for _, d := range c.fileRoots {
		fi, err := os.Stat(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			errs = append(errs, fmt.Errorf("-file-root %s: the directory does not exist", d))
		case err != nil:
			errs = append(errs, fmt.Errorf("-file-root %s: %w", d, err))
		case !fi.IsDir():
			errs = append(errs, fmt.Errorf("-file-root %s: not a directory", d))
		}
	}
	return errors.Join(errs...)
}

func (e *env) flags(name string, c *common) *flag.FlagSet {
	fs := flag.NewFlagSet("authsrv "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.StringVar(&c.dataDir, "data-dir", defaultDataDir(e.getenv, os.Getppid()), dataDirUsage)
	fs.StringVar(&c.storeURL, "store", "", storeUsage)
	fs.DurationVar(&c.storeTimeout, "store-connect-timeout", postgres.DefaultConnectTimeout, storeTimeoutUsage)
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error, disabled")
	fs.StringVar(&c.logFormat, "log-format", "json", logFormatUsage)
	fs.StringVar(&c.nodeName, "node-name", "", "name of this node (default: the host name)")
	fs.StringVar(&c.superusers, "superuser-realms", "", "comma separated realms whose users are administrators")
	fs.Int64Var(&c.kdfBudget, "kdf-budget-mib", authsrv.DefaultKDFBudget>>20, "memory for concurrent PIN/password hashes, MiB")
	fs.DurationVar(&c.openTimeout, "open-timeout", authsrv.DefaultOpenTimeout, "how long to wait for the data directory's lock")
	fs.StringVar(&c.smsScripts, "sms-script-dir", "", "directory the script SMS provider may run programs from (default: script provider disabled)")
	fs.StringVar(&c.evScripts, "event-script-dir", "", "directory of the programs the Script event handler may run (default: none)")
	fs.StringVar(&c.spoolDir, "notification-spool-dir", "", "directory the UserNotification event handler's savefile action writes to (default: savefile disabled)")
	fs.StringVar(&c.publicURL, "public-url", "", "the server's address as users reach it, for the {url} tag of notifications")
	fs.String("config", "", configUsage)
	return fs
}

// parse parses args, then fills every flag not given on the command line
// from AUTHSRV_<FLAG>, and those still unset from the -config file.
func (e *env) parse(fs *flag.FlagSet, args []string) error {
	if e.captureFlags != nil {
		e.captureFlags(fs)
		return errCaptured
	}
	// Flags may come before or after the positional arguments
	// ("admin add NAME -data-dir D"); "--" ends the flags.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" || (len(positional) > 0 && positional[len(positional)-1] == "--") {
			positional = append(positional, args...)
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	if err := fs.Parse(append([]string{"--"}, positional...)); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		key := "AUTHSRV_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := e.getenv(key); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return e.applyConfig(fs)
}

// defaultGCPercent is the serve command's GOGC: Go's own default, with the
// memory limit (-memory-limit) bounding the heap. A PIN or password check
// allocates Argon2id's 19 MiB anew for every hash; at 100 the collector
// runs every two or three hashes. Measured with authbench on two cores, 32
// clients: PIN checks at 86 % of what Argon2id alone allows at 100, 96 % at
// 400. But 400 lets the heap grow to five times the live data under any
// load: at a million tokens and users (live heap ~100 MiB: the passwd
// index, the decode and user caches) validate load took the anonymous RSS
// to 645 MiB (authbench scale). A site whose load is mostly PIN hashes may
// set -gc-percent 400; the KDF budget bounds the hashes either way.
const defaultGCPercent = 100

// gcSetting is the GOGC to set: the flag's value when it was given (on
// the command line or as AUTHSRV_GC_PERCENT), else the default unless the
// Go runtime already took GOGC from the environment.
func gcSetting(flagValue int, given bool, getenv func(string) string) (int, bool) {
	if given {
		return flagValue, true
	}
	if getenv("GOGC") != "" {
		return 0, false
	}
	return flagValue, true
}

func (c *common) options(log zerolog.Logger) ([]authsrv.Option, error) {
	roots, err := c.roots()
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(c.dataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", c.dataDir, err)
	}
	dial, err := c.dialPolicy()
	if err != nil {
		return nil, err
	}
	opts := []authsrv.Option{
		authsrv.WithDataDir(c.dataDir),
		authsrv.WithDialPolicy(dial),
		authsrv.WithLogger(log),
		authsrv.WithKDFBudget(c.kdfBudget<<20, authsrv.DefaultKDFMaxWait),
		authsrv.WithOpenTimeout(c.openTimeout),
		authsrv.WithResolverTypes(builtin.Types(builtin.WithFileRoots(roots...), builtin.WithDataDir(dataDir))),
		authsrv.WithFileRoots(roots...),
	}
	if c.nodeName != "" {
		opts = append(opts, authsrv.WithNodeName(c.nodeName))
	}
	if c.smsScripts != "" {
		opts = append(opts, authsrv.WithSMSScriptDir(c.smsScripts))
	}
	if c.evScripts != "" {
		opts = append(opts, authsrv.WithEventScriptDir(c.evScripts))
	}
	if c.spoolDir != "" {
		opts = append(opts, authsrv.WithNotificationSpoolDir(c.spoolDir))
	}
	if c.publicURL != "" {
		opts = append(opts, authsrv.WithPublicURL(c.publicURL))
	}
	if c.superusers != "" {
		opts = append(opts, authsrv.WithSuperuserRealms(strings.Split(c.superusers, ",")...))
	}
	return opts, nil
}

func (e *env) serve(args []string) error {
	var c common
	fs := e.flags("serve", &c)
	listen := fs.String("listen", "127.0.0.1:8080", "address to listen on")
	certFile := fs.String("tls-cert", "", "TLS certificate file (PEM); with -tls-key serves HTTPS")
	keyFile := fs.String("tls-key", "", "TLS private key file (PEM)")
	drain := fs.Duration("shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight")
	metricsListen := fs.String("metrics-listen", "", "address of a separate listener serving Prometheus metrics at /metrics, e.g. 127.0.0.1:9090 (default: off)")
	autoResync := fs.Bool("auto-resync", false, "AutoResync: an HOTP, paper or TOTP token out of its window resynchronises when two consecutive values arrive within -auto-resync-timeout")
	subscriptionKey := fs.String("subscription-key", "", "PEM file with the public key (Ed25519, or RSA of at least 2048 bits) that uploaded subscription files must be signed with (default: none, every upload is refused)")
	autoResyncTimeout := fs.Duration("auto-resync-timeout", 300*time.Second, "how long after the first value of an AutoResync the second may come")
	statsInterval := fs.Duration("stats-interval", authsrv.DefaultStatsInterval, "how often the statistics of /monitoring/ are recorded (token numbers, event counters); 0 turns it off")
	fs.Var(&c.fileRoots, "file-root", "directory the files an administrator names may lie in: a passwd resolver's file, an LDAP resolver's TLS_CA_FILE, an SMTP server's S/MIME key and certificate (repeatable; in AUTHSRV_FILE_ROOT separate several with ':'); default: "+DefaultFileRoot+" and the data directory's files subfolder. The data directory's own files are never readable")
	fs.Var(&c.allowDial, "allow-dial", allowDialUsage)
	var retention auditRetention
	retention.register(fs)
	var memLimit memoryLimit
	memLimit.register(fs)
	var resident residentLimit
	resident.register(fs)
	var floor heapFloor
	floor.register(fs)
	var radiusOpts radiusFlags
	radiusOpts.register(fs)
	gcPercent := fs.Int("gc-percent", defaultGCPercent, "the Go collector's GOGC: how far the heap grows past the live data before a collection (-1: off); GOGC in the environment wins over this default")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *gcPercent < -1 {
		return fmt.Errorf("-gc-percent %d: want -1 (off) or more", *gcPercent)
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "gc-percent" })
	if pct, ok := gcSetting(*gcPercent, given || e.getenv("AUTHSRV_GC_PERCENT") != "", e.getenv); ok {
		debug.SetGCPercent(pct)
	}
	if err := memLimit.apply(c.kdfBudget<<20, e.getenv); err != nil {
		return err
	}
	stopFloor := startGCFloor(currentGCPercent(), floor.bytes)
	defer stopFloor()
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if (*certFile == "") != (*keyFile == "") {
		return errors.New("-tls-cert and -tls-key go together")
	}
	log, err := e.logger(&c)
	if err != nil {
		return err
	}
	if *autoResyncTimeout <= 0 {
		return fmt.Errorf("-auto-resync-timeout %s: want more than 0", *autoResyncTimeout)
	}
	if err := c.checkRoots(); err != nil {
		return err
	}
	radiusCfg, err := radiusOpts.config(log)
	if err != nil {
		return err
	}
	opts, err := c.options(log)
	if err != nil {
		return err
	}
	opts = append(opts, authsrv.WithTokenSettings(token.Settings{AutoResync: *autoResync, AutoResyncTimeout: *autoResyncTimeout}), authsrv.WithStoreResidentLimit(resident.bytes))
	opts = append(opts, authsrv.WithStatsInterval(*statsInterval))
	if ret, err := retention.option(fs); err != nil {
		return err
	} else if ret != nil {
		opts = append(opts, ret)
	}
	if *subscriptionKey != "" {
		opt, err := subscriptionKeyOption(*subscriptionKey)
		if err != nil {
			return err
		}
		opts = append(opts, opt)
	}
	var prom *promMetrics
	if *metricsListen != "" {
		if prom, err = listenMetrics(*metricsListen); err != nil {
			return fmt.Errorf("-metrics-listen: %w", err)
		}
		defer prom.close(context.Background())
		opts = append(opts, prom.option())
	}
	st, err := e.openStore(&c)
	if err != nil {
		return err
	}
	if st != nil {
		e.stores = append(e.stores, st)
	}
	s, err := e.newServer(&c, st, opts)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	// The files subfolder is where an operator puts passwd files by
	// default; the server creates it so that the default root exists.
	if err := os.Mkdir(filepath.Join(c.dataDir, authsrv.FilesDir), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("data directory: %w", err)
	}
	if err := e.firstAdmin(s); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The control socket lets "admin" and "backup" reach this server. Without
	// it (a data directory path too long for a Unix socket, say) the server
	// still runs; those commands then need it stopped.
	if ctl, err := server.ListenControl(c.dataDir); err != nil {
		log.Warn().Err(err).Msg("no control socket: admin and backup commands need the server stopped")
	} else {
		ctlSrv := server.HTTPServer("", server.Control(s))
		ctlSrv.WriteTimeout = 0 // backups stream for as long as they take
		go func() { _ = ctlSrv.Serve(ctl) }()
		defer func() { _ = ctlSrv.Close(); _ = os.Remove(filepath.Join(c.dataDir, server.ControlSocket)) }()
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := server.HTTPServer(*listen, server.New(s))
	errc := make(chan error, 2)
	go func() {
		if *certFile != "" {
			errc <- srv.ServeTLS(ln, *certFile, *keyFile)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	go func() { errc <- s.Run(ctx) }()
	radiusLn, err := radiusOpts.start(ctx, radiusCfg, s.Validator())
	if err != nil {
		return err
	}
	if radiusLn != nil {
		log.Info().Str("radius_listen", radiusLn.addr()).Int("radius_clients", len(radiusCfg.Clients)).Msg("serving RADIUS")
		fmt.Fprintf(e.stdout, "authsrv RADIUS on udp %s\n", radiusLn.addr())
	}
	if prom != nil {
		if err := prom.serve(s, log); err != nil {
			return err
		}
		log.Info().Str("metrics_listen", prom.ln.Addr().String()).Msg("serving metrics at /metrics")
	}
	scheme := "http"
	if *certFile != "" {
		scheme = "https"
	}
	log.Info().Str("listen", ln.Addr().String()).Str("data_dir", c.dataDir).Bool("postgres_store", c.onPostgres()).Func(collectorFacts).Str("gc_heap_floor", floor.String()).Msg("serving")
	fmt.Fprintf(e.stdout, "authsrv %s serving on %s://%s (data in %s)\n", authsrv.Version, scheme, ln.Addr(), c.dataDir)

	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	if prom != nil {
		prom.close(sctx)
	}
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	stop() // ends RADIUS's reading when the HTTP server stopped first
	if err := radiusLn.wait(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return s.Close()
}

// firstAdmin creates "admin" with a random password when no administrator
// exists, and prints the password once.
func (e *env) firstAdmin(s *authsrv.Server) error {
	n, err := s.Admins().Count(e.ctx)
	if err != nil || n > 0 {
		return err
	}
	pw, err := randomPassword()
	if err != nil {
		return err
	}
	if err := s.Ops().AddAdmin(e.ctx, cliCaller, "admin", pw); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Created the administrator \"admin\" with the password %s\nIt is shown only this once; change it with: authsrv admin passwd admin\n", pw)
	return nil
}

func randomPassword() (string, error) {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// adminOps is what the admin commands need, served either by the store
// directly or by a running server's control socket.
type adminOps interface {
	list(ctx context.Context) ([]server.AdminInfo, error)
	add(ctx context.Context, name, pw string) error
	passwd(ctx context.Context, name, pw string) error
	del(ctx context.Context, name string) error
	setDisabled(ctx context.Context, name string, disabled bool) error
}

type directOps struct{ s *authsrv.Server }

func (d directOps) list(ctx context.Context) ([]server.AdminInfo, error) {
	l, err := d.s.Admins().List(ctx)
	out := make([]server.AdminInfo, len(l))
	for i, a := range l {
		out[i] = server.AdminInfo{Username: a.Name, Created: a.Created, PasswordChanged: a.PasswordChanged, Disabled: a.Disabled}
	}
	return out, err
}
func (d directOps) add(ctx context.Context, n, p string) error {
	return d.s.Ops().AddAdmin(ctx, cliCaller, n, p)
}
func (d directOps) passwd(ctx context.Context, n, p string) error {
	return d.s.Ops().SetAdminPassword(ctx, cliCaller, n, p)
}
func (d directOps) del(ctx context.Context, n string) error {
	return d.s.Ops().DeleteAdmin(ctx, cliCaller, n)
}
func (d directOps) setDisabled(ctx context.Context, n string, off bool) error {
	return d.s.Ops().SetAdminDisabled(ctx, cliCaller, n, off)
}

// cliCaller is the command's own caller: the operator on this machine, a
// trusted local administrator.
var cliCaller = caller.Caller{UserAgent: "authsrv-cli"}

type remoteOps struct{ cc *server.ControlClient }

func (r remoteOps) list(ctx context.Context) ([]server.AdminInfo, error) { return r.cc.Admins(ctx) }
func (r remoteOps) add(ctx context.Context, n, p string) error           { return r.cc.AddAdmin(ctx, n, p) }
func (r remoteOps) passwd(ctx context.Context, n, p string) error {
	return r.cc.SetAdminPassword(ctx, n, p)
}
func (r remoteOps) del(ctx context.Context, n string) error { return r.cc.DeleteAdmin(ctx, n) }
func (r remoteOps) setDisabled(ctx context.Context, n string, off bool) error {
	return r.cc.SetAdminDisabled(ctx, n, off)
}

// open opens the data directory directly, or, when a running server holds
// it, connects to that server's control socket. Exactly one of the results
// is non-nil on success; closeFn releases it.
func (e *env) open(c *common) (*authsrv.Server, *server.ControlClient, error) {
	if err := c.requireDataDir(false); err != nil {
		return nil, nil, err
	}
	log, err := e.logger(c)
	if err != nil {
		return nil, nil, err
	}
	opts, err := c.options(log)
	if err != nil {
		return nil, nil, err
	}
	if err := c.checkStoreFlag(); err != nil {
		return nil, nil, err
	}
	if c.onPostgres() {
		// No lock tells whether this node's server runs: ask its
		// control socket first, so that what the command changes in the
		// server's memory (a rotated JWT key) reaches it.
		if cc, cerr := server.DialControl(c.dataDir); cerr == nil {
			return nil, cc, nil
		}
		st, err := e.openStore(c)
		if err != nil {
			return nil, nil, err
		}
		e.stores = append(e.stores, st)
		s, err := e.newServer(c, st, opts)
		return s, nil, err
	}
	s, err := authsrv.New(append(opts, authsrv.WithOpenTimeout(min(c.openTimeout, 500*time.Millisecond)))...)
	if err == nil {
		return s, nil, nil
	}
	if !errors.Is(err, store.ErrLocked) {
		return nil, nil, err
	}
	cc, cerr := server.DialControl(c.dataDir)
	if cerr != nil {
		return nil, nil, fmt.Errorf("%w; and %w", err, cerr)
	}
	return nil, cc, nil
}

func (e *env) admin(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	sub, args := args[0], args[1:]
	var c common
	fs := e.flags("admin "+sub, &c)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	want := map[string]int{"add": 1, "list": 0, "delete": 1, "passwd": 1, "disable": 1, "enable": 1}
	n, ok := want[sub]
	if !ok || fs.NArg() != n {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	s, cc, err := e.open(&c)
	if err != nil {
		return err
	}
	var ops adminOps = remoteOps{cc}
	if s != nil {
		defer func() { _ = s.Close() }()
		ops = directOps{s}
	}
	switch sub {
	case "list":
		list, err := ops.list(e.ctx)
		if err != nil {
			return err
		}
		for _, a := range list {
			disabled := ""
			if a.Disabled {
				disabled = "\tdisabled"
			}
			fmt.Fprintf(e.stdout, "%s\tcreated %s\tpassword changed %s%s\n", a.Username,
				a.Created.Format(time.RFC3339), a.PasswordChanged.Format(time.RFC3339), disabled)
		}
		return nil
	case "delete":
		return ops.del(e.ctx, fs.Arg(0))
	case "disable", "enable":
		return ops.setDisabled(e.ctx, fs.Arg(0), sub == "disable")
	}
	pw, err := e.readPassword(fs.Arg(0))
	if err != nil {
		return err
	}
	if sub == "add" {
		err = ops.add(e.ctx, fs.Arg(0), pw)
	} else {
		err = ops.passwd(e.ctx, fs.Arg(0), pw)
	}
	if err == nil {
		fmt.Fprintf(e.stdout, "done: %s\n", fs.Arg(0))
	}
	return err
}

// apiCmd is "api createtoken": it prints an API key, a JWT of role
// validate signed with the data directory's JWT key (by a running server
// through its control socket, or directly), for clients of /validate/check
// under the AUTHZ policy api_key_required. The key goes to standard output
// only, never to a log.
func (e *env) apiCmd(args []string) error {
	if len(args) == 0 || args[0] != "createtoken" {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	var c common
	fs := e.flags("api createtoken", &c)
	days := fs.Int("validity", server.DefaultAPIKeyDays, "days the API key is valid")
	if err := e.parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	validity, err := server.APIKeyValidity(*days)
	if err != nil {
		return err
	}
	if err := c.requireDataDir(false); err != nil {
		return err
	}
	// A key signed with a JWT key that a fresh data directory would make
	// up now opens nothing: refuse instead of creating one.
	if _, err := os.Stat(filepath.Join(c.dataDir, authsrv.JWTKeysFile)); err != nil {
		if _, err := os.Stat(filepath.Join(c.dataDir, authsrv.JWTKeyFile)); err != nil {
			return fmt.Errorf("no JWT key in %s (start the server once to create it): %w", c.dataDir, err)
		}
	}
	s, cc, err := e.open(&c)
	if err != nil {
		return err
	}
	var tok string
	var exp time.Time
	if s != nil {
		defer func() { _ = s.Close() }()
		tok, exp, err = server.NewAPIKey(s, validity)
	} else {
		tok, exp, err = cc.CreateAPIKey(e.ctx, *days)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, tok)
	fmt.Fprintf(e.stderr, "API key of role validate, valid until %s; send it in the Authorization header\n", exp.UTC().Format(time.RFC3339))
	return nil
}

// readPassword prompts twice on a terminal, else reads the first line of
// standard input.
func (e *env) readPassword(name string) (string, error) {
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(e.stderr, "Password for %s: ", name)
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", err
		}
		fmt.Fprint(e.stderr, "Again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", err
		}
		if string(a) != string(b) {
			return "", errors.New("the passwords differ")
		}
		return string(a), nil
	}
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no password on standard input")
	}
	return line, nil
}

func (e *env) backup(args []string) error {
	var c common
	fs := e.flags("backup", &c)
	out := fs.String("out", "", "backup file to write (default: authsrv-backup-<time>.tar; - for standard output)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := c.notOnPostgres("backup", "copy the data with \"authsrv store copy -from postgres://... -to FILE\" (or use the database's own backups) and keep the data directory's key files with it"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	s, cc, err := e.open(&c)
	if err != nil {
		return err
	}
	if s != nil {
		defer func() { _ = s.Close() }()
	}
	path := *out
	if path == "" {
		path = "authsrv-backup-" + time.Now().UTC().Format("20060102T150405Z") + ".tar"
	}
	var w io.Writer = e.stdout
	var f *os.File
	if path != "-" {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		w = f
	}
	if s != nil {
		_, err = s.Backup(e.ctx, w)
	} else {
		_, err = cc.Backup(e.ctx, w)
	}
	if f != nil {
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
			return err
		}
		fmt.Fprintf(e.stderr, "backup written to %s (it holds the keys: keep it secret)\n", path)
	}
	return err
}

func (e *env) restore(args []string) error {
	var c common
	fs := e.flags("restore", &c)
	force := fs.Bool("force", false, "replace existing data in the data directory")
	keep := fs.Bool("keep-counters", false, "keep OTP counters as in the backup (planned migration); by default they move forward against replay")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := c.notOnPostgres("restore", "restore into a data directory, then \"authsrv store copy -from DATADIR/"+authsrv.DBFile+" -to postgres://...\""); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	if err := c.requireDataDir(true); err != nil {
		return err
	}
	var r io.Reader = e.stdin
	if p := fs.Arg(0); p != "-" {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	m, err := authsrv.Restore(r, c.dataDir, authsrv.RestoreOptions{Force: *force, KeepCounters: *keep})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "restored the backup of node %s made %s by authsrv %s into %s\n",
		m.Node, m.Created.Format(time.RFC3339), m.Version, c.dataDir)
	if *keep {
		fmt.Fprintln(e.stdout, "OTP counters were kept as in the backup: OTP values used after the backup can be used again")
	} else {
		fmt.Fprintf(e.stdout, "OTP counters of %d tokens were moved forward (TOTP to now, HOTP by the count window) so that values used after the backup cannot be replayed\n", m.RolledForward)
	}
	return nil
}

// auditCmd is "audit verify": it checks the audit log of the data
// directory (directly, or through a running server), or of a copy of the
// data file given with -db (read with the data directory's audit key).
func (e *env) auditCmd(args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprint(e.stderr, usage)
		return errUsage
	}
	var c common
	fs := e.flags("audit verify", &c)
	dbFile := fs.String("db", "", "verify this copy of a data file instead of the data directory's store")
	if err := e.parse(fs, args[1:]); err != nil {
		return err
	}
	if err := c.requireDataDir(false); err != nil {
		return err
	}
	var rep audit.Report
	var err error
	switch {
	case *dbFile != "":
		seed, rerr := os.ReadFile(filepath.Join(c.dataDir, authsrv.AuditKeyFile))
		if rerr != nil {
			return fmt.Errorf("the audit key: %w", rerr)
		}
		if len(seed) != ed25519.SeedSize {
			return fmt.Errorf("the audit key in %s is not %d bytes", c.dataDir, ed25519.SeedSize)
		}
		db, oerr := bolt.Open(*dbFile, bolt.Options{Timeout: c.openTimeout})
		if oerr != nil {
			return oerr
		}
		defer func() { _ = db.Close() }()
		pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
		rep, err = audit.VerifyStore(e.ctx, db, pub)
	default:
		s, cc, oerr := e.open(&c)
		if oerr != nil {
			return oerr
		}
		if s != nil {
			defer func() { _ = s.Close() }()
			rep, err = s.Audit().Verify(e.ctx)
		} else {
			rep, err = cc.AuditVerify(e.ctx)
		}
	}
	if err != nil {
		return err
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(e.stdout, "entry %d: %s: %s\n", p.Number, p.Kind, p.Detail)
	}
	if !rep.OK() {
		fmt.Fprintf(e.stdout, "audit log: %d entries (%d..%d): %d problems\n", rep.Entries, rep.First, rep.Last, len(rep.Problems))
		return errProblems
	}
	fmt.Fprintf(e.stdout, "audit log: %d entries (%d..%d): OK\n", rep.Entries, rep.First, rep.Last)
	return nil
}

// subscriptionKeyOption reads the -subscription-key PEM file.
func subscriptionKeyOption(path string) (authsrv.Option, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-subscription-key: %w", err)
	}
	key, err := subscription.ParsePublicKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("-subscription-key %s: %w", path, err)
	}
	return authsrv.WithSubscriptionKey(key), nil
}
