// Package authsrv is an OTP authentication server compatible with
// privacyIDEA's HTTP API, as a library. New builds a Server from options;
// the Server wires every subsystem to one store, one key set, one logger and
// one clock, and exposes them so that a Go program can manage and check
// credentials without HTTP. Package server mounts the HTTP API on a Server.
//
// Package authsrv sits on floor 5: it imports the subsystems and never the
// server package.
package authsrv

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/admin"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caconnector"
	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/sysconfig"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
	"github.com/authsrv/authsrv/validate"
)

// Version is the release of this module.
const Version = "0.1.0"

// Product is the service name shown in the envelope's version text.
const Product = "authsrv"

// Files in a data directory.
const (
	DBFile       = "authsrv.db"
	EncKeyFile   = "enckey"
	JWTKeyFile   = "jwtkey"
	AuditKeyFile = "auditkey"
	// FilesDir is the subfolder for files an administrator may name (a
	// passwd file): the only part of the data directory a resolver reads.
	FilesDir = "files"
)

// serverBucket holds the root package's own records (the enckey canary).
const serverBucket = "server"

var canaryKey = []byte("enckey_canary")

// ErrWrongKey means the enckey does not match the data.
var ErrWrongKey = errors.New("the enckey does not match this data (canary check failed): start with the enckey these data were written with")

// Server is one authsrv instance.
type Server struct {
	cfg       config
	st        store.Store
	ownsStore bool
	sealer    *secret.Sealer
	hasher    *secret.Hasher
	jwtKeys   *keyRing
	nodeID    string
	admins    *admin.Service
	resolvers *resolver.Service
	realms    *realm.Service
	attrs     *user.Attributes
	policies  *policy.Service
	audit     *audit.Log
	notify    *notify.Service
	machines  *machine.Resolvers
	tokens    *token.Service
	validator *validate.Validator
	events    *eventing.Service
	ops       *Ops
	clients   *clientRecorder // client applications (clientapps.go)

	// The machine tokens, their applications and the service IDs.
	serviceIDs    *machine.ServiceIDs
	machineTokens *machine.Tokens
	// sysconf is the system configuration (sysconfig.go).
	sysconf *sysconfig.Service
	// caconnectors are the CA connectors (caconnector.go).
	caconnectors *caconnector.Service

	ping      storePing // Ready's cached check of a database store
	started   atomic.Bool
	settled   atomic.Bool // the start-up work is done (startUp)
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// New builds a Server: it opens (or creates) the store and keys, checks the
// enckey against the data, and wires the subsystems. It starts no
// goroutines; call Run for background work.
func New(opts ...Option) (*Server, error) {
	cfg := defaults()
	var errs []error
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if err := cfg.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("authsrv: %w", err)
	}
	if cfg.rand == nil {
		cfg.rand = rand.Reader
	}
	s := &Server{cfg: cfg, done: make(chan struct{})}
	s.ops = &Ops{s: s}
	if err := s.open(); err != nil {
		if s.ownsStore && s.st != nil {
			_ = s.st.Close()
		}
		return nil, fmt.Errorf("authsrv: %w", err)
	}
	s.watchStore()
	s.started.Store(true)
	s.startUp()
	return s, nil
}

func (s *Server) open() error {
	c := &s.cfg
	if c.dataDir != "" {
		if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		dbPath := filepath.Join(c.dataDir, DBFile)
		_, statErr := os.Stat(dbPath)
		hasData := statErr == nil
		if c.encKey == nil {
			keyPath := filepath.Join(c.dataDir, EncKeyFile)
			if _, err := os.Stat(keyPath); hasData && errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s holds data but no enckey: restore the enckey these data were written with", c.dataDir)
			}
			key, _, err := secret.LoadOrCreateKeyFile(keyPath, c.rand)
			if err != nil {
				return err
			}
			c.encKey = key
		}
		if c.jwtKey == nil {
			if err := s.openJWTKeys(); err != nil {
				return err
			}
		}
		if c.auditKey == nil {
			key, err := audit.LoadOrCreateKey(filepath.Join(c.dataDir, AuditKeyFile), c.rand)
			if err != nil {
				return err
			}
			c.auditKey = key
		}
		if c.st == nil {
			db, err := bolt.Open(dbPath, bolt.Options{Timeout: c.openTimeout, ResidentLimit: c.residentLimit,
				OnCommit: c.onCommit()})
			if err != nil {
				return err
			}
			s.st, s.ownsStore = db, true
		}
	}
	if s.st == nil {
		s.st = c.st
	}
	sealer, err := secret.NewSealer(c.rand, c.encKey)
	if err != nil {
		return fmt.Errorf("enckey: %w", err)
	}
	s.sealer = sealer
	if err := checkCanary(context.Background(), s.st, sealer); err != nil {
		return err
	}
	hasher, err := secret.NewHasher(secret.HasherConfig{
		Params: secret.Params(c.kdf), BudgetBytes: c.kdfBudget, MaxWait: c.kdfMaxWait, Rand: c.rand,
		OnWait: c.onKDFWait(),
	})
	if err != nil {
		return fmt.Errorf("kdf: %w", err)
	}
	s.hasher = hasher
	if s.jwtKeys == nil {
		s.jwtKeys = newLegacyRing("", c.jwtKey, c.now())
	}
	s.admins = admin.New(s.st, hasher, c.now)
	if c.auditKey == nil {
		// No data directory: the signing key follows from the enckey.
		seed := hkdfSeed(c.encKey, "authsrv audit signing key")
		c.auditKey = ed25519.NewKeyFromSeed(seed)
	}
	lg, err := audit.New(audit.Config{Store: s.st, Key: c.auditKey, Now: c.now, MaxAge: c.auditMaxAge, MaxEntries: c.auditMaxEntries})
	if err != nil {
		return err
	}
	s.audit = lg
	s.clients = s.newClientApps()
	s.notify = notify.New(notify.Config{Store: s.st, Sealer: sealer, Log: c.log.With().Str("component", "notify").Logger(),
		Now: c.now, AllowScripts: c.smsScriptDir, Dial: c.dial, Files: c.files()})
	s.nodeID = NodeID(c.nodeName)
	if err := registerNode(context.Background(), s.st, s.nodeID, c.nodeName, c.now()); err != nil {
		return err
	}
	types := c.resolverTypes
	if types == nil {
		types = c.defaultResolverTypes()
	}
	s.resolvers = resolver.New(s.st, sealer, types, c.log, c.now)
	s.resolvers.SetDialPolicy(c.dial)
	s.machines = machine.NewResolvers(machine.ResolversConfig{Store: s.st, Sealer: sealer, Log: c.log, Files: c.files(),
		Dial: c.dial, UserTypes: types})
	s.attrs = user.NewAttributes(s.st)
	s.realms = realm.New(realm.Config{
		Store: s.st, Resolvers: s.resolvers, Attrs: s.attrs,
		LocalNode: s.nodeID, NodeExists: func(ctx context.Context, id string) (bool, error) {
			return nodeExists(ctx, s.st, id)
		},
		Superusers: c.superuserRealms,
	})
	defs := c.actionDefs
	if defs == nil {
		defs = DefaultActionDefs()
	}
	s.policies = policy.New(policy.Config{
		Store: s.st, Defs: defs, Now: c.now, NodeName: c.nodeName, Superusers: c.superuserRealms,
		RealmExists: s.realms.Exists,
		ResolverExists: func(ctx context.Context, name string) bool {
			_, ok, err := s.resolvers.Get(ctx, name)
			return err == nil && ok
		},
		NodeExists: func(ctx context.Context, name string) bool {
			nodes, err := s.Nodes(ctx)
			return err == nil && slices.ContainsFunc(nodes, func(n Node) bool { return n.Name == name })
		},
		UserResolvers: s.userResolvers,
	})
	reg := token.DefaultRegistry()
	s.initCAConnectors(c, reg)
	for _, t := range c.tokenTypes {
		reg.Register(t)
	}
	if err := s.openSysConfig(reg); err != nil {
		return err
	}
	s.tokens = token.New(token.Config{Store: s.st, Sealer: sealer, Hasher: hasher, Notify: s.notify,
		Types: reg, Settings: c.tokenSettings, Source: s.tokenSettings, Now: c.now, Rand: c.rand, DecodeCacheBytes: c.tokenCache})
	// A data file of an older release gets the token list indexes once.
	tlog, logged := c.log.With().Str("component", "token").Logger(), -1
	if err := s.tokens.BuildIndexes(context.Background(), func(n int) {
		if logged < 0 || n-logged >= 100000 {
			tlog.Info().Int("tokens", n).Msg("building the token list indexes")
			logged = n
		}
	}); err != nil {
		return fmt.Errorf("token indexes: %w", err)
	}
	s.realms.SetTokenCheck(token.RealmHasOwners)
	s.serviceIDs = machine.NewServiceIDs(s.st)
	s.machineTokens = machine.NewTokens(machine.TokensConfig{Store: s.st, Tokens: s.tokens, Machines: s.machines,
		Apps: machine.NewApps(machine.NewSSH(s.serviceIDs), machine.NewLUKS(s.tokens, c.rand))})
	// Deleting a token drops its machine tokens in the same commit.
	s.tokens.OnRemove(s.machineTokens.RemoveSerialTx)
	s.machineTokens.Apps().Register(s.newOffline())
	s.validator = validate.New(validate.Config{Tokens: s.tokens, Realms: s.realms, Policies: s.policies, Resolvers: s.resolvers, Now: c.now,
		Store: s.st, CacheKey: hkdfSeed(c.encKey, "authsrv auth cache key"), Audit: s.audit, NodeName: c.nodeName,
		Events: c.meterValidate(&validateHook{s: s, legacy: c.eventHandlers}), Attrs: s.attrs,
		AuthItems: s.offlineAuthItems})
	s.events = eventing.New(eventing.Config{Store: s.st, Audit: s.audit, Tokens: s.tokens, Realms: s.realms, Attrs: s.attrs,
		Notify: s.notify, Host: eventHost{s: s}, Log: c.log.With().Str("component", "eventing").Logger(), Now: c.now,
		Rand: c.rand, Node: c.nodeName, ScriptDir: c.eventScriptDir, SpoolDir: c.spoolDir, URL: c.publicURL,
		HTTP: eventHTTPClient(c.dial), Events: firedEvents})
	s.events.RegisterBuiltins()
	for _, m := range c.eventModules {
		s.events.Register(m)
	}
	return nil
}

// Validator returns the authentication decision (/validate/check as a
// Go API).
func (s *Server) Validator() *validate.Validator { return s.validator }

// Tokens returns the token service.
func (s *Server) Tokens() *token.Service { return s.tokens }

// ServiceIDs stores the service IDs.
func (s *Server) ServiceIDs() *machine.ServiceIDs { return s.serviceIDs }

// MachineTokens keeps the machine tokens and their applications (an
// embedder registers more applications on MachineTokens().Apps()).
func (s *Server) MachineTokens() *machine.Tokens { return s.machineTokens }

// userResolvers lists the resolvers of realm that know login (for
// policies with check_all_resolvers).
func (s *Server) userResolvers(ctx context.Context, login, realmName string) []string {
	r, _, err := s.realms.Get(ctx, realmName)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range s.realms.Ordered(r) {
		in, err := s.resolvers.Instance(ctx, e.Name)
		if err != nil {
			continue
		}
		if _, err := in.UserID(ctx, login); err == nil {
			out = append(out, in.Name())
		}
	}
	return out
}

// Policies stores and matches policies.
func (s *Server) Policies() *policy.Service { return s.policies }

// DefaultActionDefs returns the policy action definitions authsrv ships.
func DefaultActionDefs() *policy.Defs {
	d := policy.NewDefs()
	if err := d.Add(policy.Builtin()...); err != nil {
		panic("authsrv: the built-in policy actions are inconsistent: " + err.Error())
	}
	return d
}

// checkCanary seals a known value at first start and checks it later, so a
// wrong enckey stops the start instead of producing unreadable secrets.
func checkCanary(ctx context.Context, st store.Store, sealer *secret.Sealer) error {
	var canary []byte
	if err := st.View(ctx, func(tx store.Tx) error {
		canary = append([]byte(nil), tx.Bucket(serverBucket).Get(canaryKey)...)
		return nil
	}); err != nil {
		return err
	}
	if len(canary) > 0 {
		if err := sealer.CheckCanary(canary); err != nil {
			return ErrWrongKey
		}
		return nil
	}
	fresh, err := sealer.NewCanary()
	if err != nil {
		return err
	}
	return st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(serverBucket)
		if existing := b.Get(canaryKey); existing != nil {
			if sealer.CheckCanary(existing) != nil {
				return ErrWrongKey
			}
			return nil
		}
		return b.Put(canaryKey, fresh)
	})
}

// Run does the server's background work until ctx ends or Close is
// called: audit retention, and dropping the JWT keys whose last token
// expired, every RetentionInterval; and the hourly subscription check,
// which logs a warning for an expired or exceeded subscription. It
// returns nil then.
func (s *Server) Run(ctx context.Context) error {
	go s.runSubscriptionCheck(ctx)
	go s.runClientApps(ctx)
	go s.runCRLs(ctx)
	go s.runStats(ctx)
	tick := time.NewTicker(s.cfg.retentionEvery)
	defer tick.Stop()
	for {
		if n, err := s.audit.Retain(ctx); err != nil {
			s.cfg.log.Error().Err(err).Str("component", "audit").Msg("audit retention failed")
		} else if n > 0 {
			s.cfg.log.Info().Int("removed", n).Str("component", "audit").Msg("audit retention")
		}
		if _, err := s.validator.Prune(ctx); err != nil {
			s.cfg.log.Error().Err(err).Str("component", "validate").Msg("pruning the authentication records failed")
		}
		if err := s.jwtKeys.prune(s.cfg.now()); err != nil {
			s.cfg.log.Error().Err(err).Str("component", "jwt").Msg("dropping expired JWT keys failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		case <-tick.C:
		}
	}
}

// every runs fn every d (first after d, or at once when now is set)
// until ctx ends or the server closes: the loop of the background tasks
// that Run starts.
func (s *Server) every(ctx context.Context, d time.Duration, now bool, fn func(ctx context.Context)) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	if now {
		fn(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-tick.C:
			fn(ctx)
		}
	}
}

// Notify manages SMTP servers, SMS gateways and RADIUS servers and sends
// through them.
func (s *Server) Notify() *notify.Service { return s.notify }

// Audit is the audit log.
func (s *Server) Audit() *audit.Log { return s.audit }

// hkdfSeed derives a 32-byte seed from key for purpose.
func hkdfSeed(key []byte, purpose string) []byte {
	seed, err := hkdf.Key(sha256.New, key, nil, purpose, ed25519.SeedSize)
	if err != nil {
		panic("authsrv: hkdf: " + err.Error())
	}
	return seed
}

// Close releases the server. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.started.Store(false)
		close(s.done)
		if s.resolvers != nil {
			_ = s.resolvers.Close()
		}
		if s.machines != nil {
			_ = s.machines.Close()
		}
		if s.events != nil {
			s.events.Close()
		}
		if s.clients != nil {
			s.flushClientApps(context.Background())
		}
		if s.ownsStore {
			s.closeErr = s.st.Close()
		}
	})
	return s.closeErr
}

// Store is the store every subsystem writes to.
func (s *Server) Store() store.Store { return s.st }

// Admins manages the local administrator accounts.
func (s *Server) Admins() *admin.Service { return s.admins }

// Resolvers manages the user stores.
func (s *Server) Resolvers() *resolver.Service { return s.resolvers }

// Realms manages realms and finds users in them.
func (s *Server) Realms() *realm.Service { return s.realms }

// UserAttributes stores custom user attributes.
func (s *Server) UserAttributes() *user.Attributes { return s.attrs }

// NodeID is this node's id (a UUID derived from the node name).
func (s *Server) NodeID() string { return s.nodeID }

// JWTLifetime is how long an issued API token is valid.
func (s *Server) JWTLifetime() time.Duration { return s.cfg.jwtLifetime }

// Logger is the server's logger.
func (s *Server) Logger() zerolog.Logger { return s.cfg.log }

// Now is the server's clock.
func (s *Server) Now() time.Time { return s.cfg.now() }

// NodeName names this node.
func (s *Server) NodeName() string { return s.cfg.nodeName }

// DataDir is the data directory, or "" when the store was given.
func (s *Server) DataDir() string { return s.cfg.dataDir }

// SuperuserRealms lists the realms whose users get the admin role.
func (s *Server) SuperuserRealms() []string {
	return append([]string(nil), s.cfg.superuserRealms...)
}

// Started reports whether the server is open (between New and Close).
func (s *Server) Started() bool { return s.started.Load() }

// Ready checks that the server can serve: it is started, a database
// store answers a ping (ErrStoreUnreachable; see pingStore), the store
// answers a read, the enckey opens the canary, the store's writes work (while
// they fail, Ready returns the first refused write's *store.WriteError),
// no resolver is still loading its data (a *resolver.LoadingError naming
// them), and the rest of the start-up work is done (ErrWarmingUp before).
func (s *Server) Ready(ctx context.Context) error {
	if !s.Started() {
		return errors.New("not started")
	}
	// A database that does not answer (ErrStoreUnreachable).
	if err := s.pingStore(ctx, false); err != nil {
		return err
	}
	if err := checkCanary(ctx, s.st, s.sealer); err != nil {
		if !errors.Is(err, ErrWrongKey) {
			// The database may have gone since the cached ping.
			if perr := s.pingStore(ctx, true); perr != nil {
				return perr
			}
		}
		return err
	}
	if st := store.Writes(s.st); st.Failing {
		return st.Err
	}
	// Resolvers still loading their data (*resolver.LoadingError).
	if err := s.resolvers.Loading(); err != nil {
		return err
	}
	if !s.settled.Load() {
		return ErrWarmingUp
	}
	return nil
}
