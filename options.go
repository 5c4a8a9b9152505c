package authsrv

import (
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/metrics"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// Option configures a Server. Options are applied in order; the whole set
// is validated once by New, which reports every problem together.
type Option func(*config) error

// Defaults.
const (
	DefaultOpenTimeout = 2 * time.Second
	DefaultJWTLifetime = time.Hour
	DefaultKDFBudget   = 512 << 20
	DefaultKDFMaxWait  = 10 * time.Second
)

type config struct {
	dataDir         string
	st              store.Store
	encKey          []byte
	jwtKey          []byte
	log             zerolog.Logger
	now             func() time.Time
	rand            io.Reader
	nodeName        string
	superuserRealms []string
	kdf             KDFParams
	kdfBudget       int64
	kdfMaxWait      time.Duration
	openTimeout     time.Duration
	residentLimit   int64
	jwtLifetime     time.Duration
	resolverTypes   resolver.Registry
	tokenTypes      []token.Type
	tokenSettings   token.Settings
	tokenCache      int64
	actionDefs      *policy.Defs
	auditKey        ed25519.PrivateKey
	auditMaxAge     time.Duration
	auditMaxEntries uint64
	retentionEvery  time.Duration
	smsScriptDir    string
	fileRoots       []string
	eventHandlers   []EventHandler
	eventModules    []eventing.Module
	eventScriptDir  string
	spoolDir        string
	publicURL       string
	dial            *netguard.Policy
	clientApps      clientAppsConfig // WithClientAppLimit, WithClientAppRetention (clientapps.go)
	metrics         metrics.Sink
	subscriptionKey crypto.PublicKey // WithSubscriptionKey (subscriptions.go)
	stats           statsConfig      // WithStatsInterval, WithStatsRetention, WithLocation (stats.go)
}

func defaults() config {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	return config{
		log:            zerolog.Nop(),
		now:            time.Now,
		nodeName:       host,
		kdf:            KDFParams(secret.DefaultParams),
		kdfBudget:      DefaultKDFBudget,
		kdfMaxWait:     DefaultKDFMaxWait,
		openTimeout:    DefaultOpenTimeout,
		residentLimit:  DefaultStoreResidentLimit,
		jwtLifetime:    DefaultJWTLifetime,
		retentionEvery: time.Hour,
		stats:          defaultStatsConfig(),
	}
}

// WithDialPolicy sets the policy every connection an administrator
// configures goes through (SMTP servers, SMS gateways, RADIUS servers,
// LDAP, SQL and SCIM user stores). Without it the server uses netguard's
// safe default, which refuses loopback, link-local, private and the other
// special address ranges; a program whose servers run on such addresses
// allows them here (netguard.Parse("10.0.0.0/8"), for example).
func WithDialPolicy(p *netguard.Policy) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("dial policy: nil")
		}
		c.dial = p
		return nil
	}
}

// WithEventHandler adds h to the handlers that run around every
// operation (in the order added).
func WithEventHandler(h EventHandler) Option {
	return func(c *config) error {
		if h == nil {
			return errors.New("event handler: nil")
		}
		c.eventHandlers = append(c.eventHandlers, h)
		return nil
	}
}

// WithEventModule registers a handler module of the program's own for
// event handler definitions (next to the built-in UserNotification,
// Token, WebHook, ...; a module of the same name replaces the built-in
// one).
func WithEventModule(m eventing.Module) Option {
	return func(c *config) error {
		if m == nil || m.Name() == "" {
			return errors.New("event module: nil or unnamed")
		}
		c.eventModules = append(c.eventModules, m)
		return nil
	}
}

// WithEventScriptDir is the directory of the executables the Script event
// handler module may run (privacyIDEA's PI_SCRIPT_HANDLER_DIRECTORY); only
// files directly in it are offered and run. Without it the module has no
// actions.
func WithEventScriptDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("event script directory: empty path")
		}
		c.eventScriptDir = dir
		return nil
	}
}

// WithNotificationSpoolDir is where the UserNotification module's
// savefile action writes (privacyIDEA's
// PI_NOTIFICATION_HANDLER_SPOOLDIRECTORY). Without it savefile fails.
func WithNotificationSpoolDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("notification spool directory: empty path")
		}
		c.spoolDir = dir
		return nil
	}
}

// WithPublicURL is the server's address as users reach it, for the {url}
// tag of notifications.
func WithPublicURL(u string) Option {
	return func(c *config) error {
		c.publicURL = u
		return nil
	}
}

// WithSMSScriptDir allows the script SMS provider to run programs from dir
// (and only from there). Without it the script provider is disabled.
func WithSMSScriptDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("sms script directory: empty path")
		}
		c.smsScriptDir = dir
		return nil
	}
}

// WithFileRoots confines the files an administrator may name in the
// configuration that the Server reads itself (an SMTP server's S/MIME key
// and certificate), and the passwd file of the default resolver types, to
// the directory trees dirs (absolute paths; repeated, they add up). The
// data directory's own files are never readable through the configuration,
// with or without roots, except beneath its files subfolder. A registry
// given to WithResolverTypes is confined by its own types
// (builtin.WithFileRoots).
func WithFileRoots(dirs ...string) Option {
	return func(c *config) error {
		for _, d := range dirs {
			if d == "" || !filepath.IsAbs(d) {
				return fmt.Errorf("file root %q: want an absolute directory path", d)
			}
			c.fileRoots = append(c.fileRoots, filepath.Clean(d))
		}
		return nil
	}
}

// files is the confinement of administrator-named files: the file roots
// and the data directory.
func (c *config) files() fileroot.Confinement {
	return fileroot.Confinement{Roots: c.fileRoots, DataDir: c.dataDir}
}

// WithAuditKey sets the Ed25519 key that signs the audit log, instead of
// the data directory's auditkey file (without a data directory the key is
// derived from the enckey).
func WithAuditKey(key ed25519.PrivateKey) Option {
	return func(c *config) error {
		if len(key) != ed25519.PrivateKeySize {
			return errors.New("audit key: not an Ed25519 private key")
		}
		c.auditKey = key
		return nil
	}
}

// WithAuditRetention removes audit entries older than maxAge or beyond the
// newest maxEntries (0 for no limit), checked every interval by Run.
func WithAuditRetention(maxAge time.Duration, maxEntries uint64, interval time.Duration) Option {
	return func(c *config) error {
		if maxAge < 0 || interval <= 0 {
			return fmt.Errorf("audit retention: age %s, interval %s", maxAge, interval)
		}
		c.auditMaxAge, c.auditMaxEntries, c.retentionEvery = maxAge, maxEntries, interval
		return nil
	}
}

// WithActionDefs replaces the registry of policy action definitions (the
// default is DefaultActionDefs()). A Go program that adds a token type or
// handler declares its actions there.
func WithActionDefs(d *policy.Defs) Option {
	return func(c *config) error {
		if d == nil {
			return errors.New("action definitions: nil")
		}
		c.actionDefs = d
		return nil
	}
}

// WithResolverTypes replaces the table of user-store types (the default,
// DefaultResolverTypes, has passwdresolver only; resolver/builtin.Types
// adds ldapresolver, sqlresolver and scimresolver). A Go program can add
// its own type to either table and pass it here.
func WithResolverTypes(types resolver.Registry) Option {
	return func(c *config) error {
		if len(types) == 0 {
			return errors.New("resolver types: empty")
		}
		c.resolverTypes = types
		return nil
	}
}

// WithTokenTypes adds token types to the built-in ones (a type with a
// built-in name replaces it).
func WithTokenTypes(types ...token.Type) Option {
	return func(c *config) error {
		c.tokenTypes = append(c.tokenTypes, types...)
		return nil
	}
}

// WithTokenSettings sets the system-wide token defaults (default OTP
// length, windows, max fail count, failcounter clear timeout, TOTP step
// and window, challenge validity, random serials, AutoResync and its
// timeout).
func WithTokenSettings(set token.Settings) Option {
	return func(c *config) error {
		c.tokenSettings = set
		return nil
	}
}

// WithTokenDecodeCache bounds the memory (bytes) of the cache of decoded
// token records that authentications read (default
// token.DefaultDecodeCacheBytes, 16 MiB; negative: no cache).
func WithTokenDecodeCache(bytes int64) Option {
	return func(c *config) error {
		c.tokenCache = bytes
		return nil
	}
}

// WithDataDir keeps the store (authsrv.db) and the key files (enckey,
// jwtkey) in dir, creating them at first start.
func WithDataDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("data directory: empty path")
		}
		c.dataDir = dir
		return nil
	}
}

// WithStore uses st instead of a store in the data directory. The caller
// keeps ownership: Close does not close it. Without a data directory the
// keys must be given with WithEncKey and WithJWTKey.
func WithStore(st store.Store) Option {
	return func(c *config) error {
		if st == nil {
			return errors.New("store: nil")
		}
		c.st = st
		return nil
	}
}

// WithEncKey sets the 32-byte key that seals secrets at rest, instead of
// the data directory's enckey file.
func WithEncKey(key []byte) Option {
	return func(c *config) error {
		if len(key) != secret.KeySize {
			return fmt.Errorf("enckey: want %d bytes, got %d", secret.KeySize, len(key))
		}
		c.encKey = append([]byte(nil), key...)
		return nil
	}
}

// WithJWTKey sets the HS256 key of the API's JSON web tokens (at least 32
// bytes), instead of the data directory's key ring (jwtkeys, or jwtkey
// before the first rotation). The program owns such a key: RotateJWTKey
// refuses to rotate it.
func WithJWTKey(key []byte) Option {
	return func(c *config) error {
		if len(key) < 32 {
			return fmt.Errorf("jwt key: want at least 32 bytes, got %d", len(key))
		}
		c.jwtKey = append([]byte(nil), key...)
		return nil
	}
}

// WithLogger sets the logger. The default logs nothing.
func WithLogger(l zerolog.Logger) Option {
	return func(c *config) error { c.log = l; return nil }
}

// WithClock sets the clock (for tests). The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("clock: nil")
		}
		c.now = now
		return nil
	}
}

// WithRand sets the random source for keys, salts and nonces. The default
// is crypto/rand.
func WithRand(r io.Reader) Option {
	return func(c *config) error {
		if r == nil {
			return errors.New("rand: nil")
		}
		c.rand = r
		return nil
	}
}

// WithNodeName names this node (policies can match it, the audit records
// it). The default is the host name.
func WithNodeName(name string) Option {
	return func(c *config) error {
		if strings.TrimSpace(name) == "" {
			return errors.New("node name: empty")
		}
		c.nodeName = name
		return nil
	}
}

// WithSuperuserRealms lists the realms whose users log in with the admin
// role (privacyIDEA's SUPERUSER_REALM). Names are compared in lower case.
func WithSuperuserRealms(realms ...string) Option {
	return func(c *config) error {
		c.superuserRealms = c.superuserRealms[:0]
		for _, r := range realms {
			if r = strings.ToLower(strings.TrimSpace(r)); r != "" {
				c.superuserRealms = append(c.superuserRealms, r)
			}
		}
		return nil
	}
}

// KDFParams are the Argon2id cost parameters of new PIN and password hashes
// (hashes already stored keep the parameters they were made with). Memory
// is in KiB; DefaultKDFParams are OWASP's minimum.
type KDFParams struct {
	Time    uint32
	Memory  uint32 // KiB
	Threads uint8
	KeyLen  uint32
	SaltLen uint32
}

// DefaultKDFParams returns the parameters a Server hashes with unless
// WithKDFParams changes them.
func DefaultKDFParams() KDFParams { return KDFParams(secret.DefaultParams) }

// WithKDFParams sets the Argon2id parameters of new PIN and password
// hashes; New refuses parameters the verifier would not accept.
func WithKDFParams(p KDFParams) Option {
	return func(c *config) error { c.kdf = p; return nil }
}

// WithKDFBudget sets how much memory (bytes) concurrent hashes may use
// together, and how long a hash may wait for it. Requests beyond it queue,
// then fail with a busy error.
func WithKDFBudget(bytes int64, maxWait time.Duration) Option {
	return func(c *config) error {
		if bytes <= 0 {
			return fmt.Errorf("kdf budget: %d bytes", bytes)
		}
		if maxWait <= 0 {
			return fmt.Errorf("kdf max wait: %s", maxWait)
		}
		c.kdfBudget, c.kdfMaxWait = bytes, maxWait
		return nil
	}
}

// WithOpenTimeout sets how long opening the data directory's store waits
// for another process to release it.
func WithOpenTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("open timeout: %s", d)
		}
		c.openTimeout = d
		return nil
	}
}

// DefaultStoreResidentLimit bounds the data file's pages kept mapped in the
// process (WithStoreResidentLimit).
const DefaultStoreResidentLimit = 32 << 20

// WithStoreResidentLimit bounds how much of the data directory's store
// file stays mapped in the process's resident memory: the file is mapped,
// and every page a lookup or a list touches would otherwise stay resident,
// so that at a million tokens the resident set grows to the file's size.
// Past the limit the pages are unmapped; they stay
// in the operating system's page cache, and the next access maps them
// again. The process's file-backed memory is checked twenty times a second.
// 0 turns the bound off. Linux only; elsewhere it has no effect. It
// applies to the store the server opens itself, not to one given with
// WithStore.
func WithStoreResidentLimit(bytes int64) Option {
	return func(c *config) error {
		if bytes < 0 {
			return fmt.Errorf("store resident limit: %d bytes", bytes)
		}
		c.residentLimit = bytes
		return nil
	}
}

// WithJWTLifetime sets how long an issued API token is valid. A key
// retired by RotateJWTKey verifies for this long after the rotation (or
// until the last API key it signed expires, if that is later).
func WithJWTLifetime(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("jwt lifetime: %s", d)
		}
		c.jwtLifetime = d
		return nil
	}
}

// validate checks the whole set once.
func (c *config) validate() error {
	var errs []error
	if c.dataDir == "" && c.st == nil {
		errs = append(errs, errors.New("no data directory and no store: give WithDataDir or WithStore"))
	}
	if c.dataDir == "" {
		if c.encKey == nil {
			errs = append(errs, errors.New("without a data directory an enckey must be given (WithEncKey)"))
		}
		if c.jwtKey == nil {
			errs = append(errs, errors.New("without a data directory a JWT key must be given (WithJWTKey)"))
		}
	}
	if c.smsScriptDir != "" {
		if err := checkScriptDir("sms script directory", c.smsScriptDir, c.dataDir); err != nil {
			errs = append(errs, err)
		}
	}
	if c.eventScriptDir != "" {
		if err := checkScriptDir("event script directory", c.eventScriptDir, c.dataDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkScriptDir refuses a script directory (kind names it) that does not exist, is
// not a directory, or would let an administrator name a file of the data
// directory as a script: the data directory itself, a directory holding
// it, or one inside it other than beneath its files subfolder (symbolic
// links resolved).
func checkScriptDir(kind, dir, dataDir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %s: the directory does not exist", kind, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %w", kind, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%s %s: not a directory", kind, dir)
	}
	if dataDir == "" {
		return nil
	}
	scripts, err := realPath(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, dir, err)
	}
	data, err := realPath(dataDir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	files := filepath.Join(data, FilesDir)
	if scripts == files || beneath(files, scripts) {
		return nil
	}
	if scripts == data || beneath(scripts, data) || beneath(data, scripts) {
		return fmt.Errorf("%s %s: overlaps the data directory %s, whose files must never be named as a script (use a directory outside it, or beneath its %s subfolder)", kind, dir, dataDir, FilesDir)
	}
	return nil
}

// realPath returns path absolute with its symbolic links resolved; for a
// path that does not exist yet (a data directory before the first start)
// its longest existing ancestor is resolved and the rest appended.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		real, err := filepath.EvalSymlinks(abs)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		parent := filepath.Dir(abs)
		if !errors.Is(err, os.ErrNotExist) || parent == abs {
			return "", err
		}
		rest = filepath.Join(filepath.Base(abs), rest)
		abs = parent
	}
}

// beneath reports whether path lies strictly beneath dir (both clean and
// absolute).
func beneath(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}
