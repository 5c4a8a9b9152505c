package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/store"
)

// resolverBucket holds one definition per machine resolver, keyed by the
// lower-cased name.
const resolverBucket = "machineresolvers"

const schema = 1

// Censored stands in for a stored secret in reads; sent back in a write
// (or a test) it keeps the stored value.
const Censored = "__CENSORED__"

// The machine resolver types.
const (
	TypeHosts = "hosts"
	TypeLDAP  = "ldap"
)

// Errors of the machine resolvers and machine lookups. Lookups return
// errors that carry the hostname or id in their text and wrap
// ErrNoMachine or ErrAmbiguousMachine, so callers test them with
// errors.Is.
var (
	// ErrResolverNotFound is returned for an unknown machine resolver.
	ErrResolverNotFound = apierr.New(apierr.ResourceNotFound, "The requested MachineResolver could not be found.")
	// ErrNoMachine: no machine resolver knows the machine.
	ErrNoMachine = apierr.New(apierr.Parameter, "The machine could not be found in any machine resolver.")
	// ErrAmbiguousMachine: several machines carry the hostname, so it
	// does not name one machine.
	ErrAmbiguousMachine = apierr.New(apierr.Parameter, "The hostname names more than one machine.")
)

// Sealer seals and opens the secrets this package stores (the LDAP bind
// password), binding each ciphertext to its record. The root passes its
// key set.
type Sealer interface {
	Seal(plaintext []byte, ad ...string) ([]byte, error)
	Open(ciphertext []byte, ad ...string) ([]byte, error)
}

var _ Sealer = (*secret.Sealer)(nil)

// ResolversConfig holds the dependencies of Resolvers.
type ResolversConfig struct {
	Store store.Store
	// Sealer seals LDAP bind passwords; without one a definition with a
	// password is refused.
	Sealer Sealer
	// Log is the component logger's parent; silent when zero.
	Log zerolog.Logger
	// Files confines the hosts files a definition may name (checked when
	// it is saved and at every read).
	Files fileroot.Confinement
	// Dial judges every LDAP connection; nil is netguard's safe default.
	Dial *netguard.Policy
	// UserTypes are the user store types of the server. The machine
	// resolver type ldap exists when they hold ldapresolver, whose
	// connection code (and file confinement) it uses; without it, as in
	// a program that links no LDAP code, there is only the type hosts.
	UserTypes resolver.Registry
}

// Def is a machine resolver definition as reads show it: passwords
// censored.
type Def struct {
	ID   int
	Name string
	Type string
	Data map[string]string
}

type record struct {
	store.Versioned
	ID     int               `json:"id"`
	Name   string            `json:"name"`
	Type   string            `json:"type"`
	Data   map[string]string `json:"data"`
	Sealed map[string][]byte `json:"sealed,omitempty"`
	Rev    uint64            `json:"rev"`
}

func (r record) def() Def {
	d := Def{ID: r.ID, Name: r.Name, Type: r.Type, Data: maps.Clone(r.Data)}
	if d.Data == nil {
		d.Data = map[string]string{}
	}
	for k := range r.Sealed {
		d.Data[k] = Censored
	}
	return d
}

// backend is one built machine resolver.
type backend interface {
	// machines lists the machines f selects (f.Resolver is already
	// applied).
	machines(ctx context.Context, f MachineFilter) ([]Machine, error)
	// named lists the machines that carry hostname exactly (ignoring
	// case).
	named(ctx context.Context, hostname string) ([]Machine, error)
	// get returns the machine id; ok is false when there is none.
	get(ctx context.Context, id string) (Machine, bool, error)
	close()
}

// kind is one machine resolver type: the parameters it stores, which of
// them are passwords, its check and its constructor.
type kind struct {
	params    []string
	passwords []string
	// validate checks a configuration at save time.
	validate func(r *Resolvers, cfg map[string]string) error
	// build makes the backend of a configuration.
	build func(ctx context.Context, r *Resolvers, name string, cfg map[string]string) (backend, error)
	// test tries a configuration (POST /machineresolver/test).
	test func(ctx context.Context, r *Resolvers, cfg map[string]string) (bool, string)
}

func (k kind) knows(p string) bool { return slices.Contains(k.params, p) }

func (k kind) password(p string) bool { return slices.Contains(k.passwords, p) }

// Resolvers keeps the machine resolver definitions and finds machines in
// them. It is safe for concurrent use.
type Resolvers struct {
	st     store.Store
	sealer Sealer
	log    zerolog.Logger
	files  fileroot.Confinement
	dial   *netguard.Policy
	kinds  map[string]kind

	mu   sync.Mutex
	live map[string]liveBackend
}

// liveBackend is a built resolver and the record revision it was built
// from.
type liveBackend struct {
	rev uint64
	b   backend
}

var _ Finder = (*Resolvers)(nil)

// NewResolvers returns the machine resolvers. It starts no goroutines.
func NewResolvers(cfg ResolversConfig) *Resolvers {
	r := &Resolvers{
		st:     cfg.Store,
		sealer: cfg.Sealer,
		log:    cfg.Log.With().Str("component", "machine").Logger(),
		files:  cfg.Files.Copy(),
		dial:   cfg.Dial,
		kinds:  map[string]kind{TypeHosts: hostsKind()},
		live:   map[string]liveBackend{},
	}
	if t, ok := cfg.UserTypes[ldapUserType]; ok && t.New != nil {
		r.kinds[TypeLDAP] = ldapKind(t)
	}
	return r
}

// Types lists the machine resolver types.
func (r *Resolvers) Types() []string { return slices.Sorted(maps.Keys(r.kinds)) }

func key(name string) []byte { return []byte(strings.ToLower(name)) }

func ad(name, param string) []string {
	return []string{resolverBucket, strings.ToLower(name), param}
}

func (r *Resolvers) kindOf(typ string) (kind, error) {
	k, ok := r.kinds[typ]
	if !ok {
		return kind{}, apierr.New(apierr.Parameter, fmt.Sprintf("machine resolver type : %s not in %v", typ, r.Types()))
	}
	return k, nil
}

// open returns the plain configuration of a record.
func (r *Resolvers) open(rec record) (map[string]string, error) {
	cfg := maps.Clone(rec.Data)
	if cfg == nil {
		cfg = map[string]string{}
	}
	for k, c := range rec.Sealed {
		if r.sealer == nil {
			return nil, fmt.Errorf("machine resolver %s: parameter %s: no key to open it", rec.Name, k)
		}
		p, err := r.sealer.Open(c, ad(rec.Name, k)...)
		if err != nil {
			return nil, fmt.Errorf("machine resolver %s: parameter %s: %w", rec.Name, k, err)
		}
		cfg[k] = string(p)
	}
	return cfg, nil
}

// read returns the record of name; ok is false when there is none.
func (r *Resolvers) read(ctx context.Context, name string) (record, bool, error) {
	var rec record
	found := false
	err := r.st.View(ctx, func(tx store.Tx) error {
		err := store.GetJSON(tx.Bucket(resolverBucket), key(name), &rec)
		if errors.Is(err, store.ErrNotFound) {
			found = false
			return nil
		}
		found = err == nil
		return err
	})
	return rec, found, err
}

// Set creates or updates the machine resolver name from params: "type"
// (required; an existing resolver keeps its type) and the type's
// parameters (hosts: filename; ldap: the LDAP user store's connection
// parameters LDAPURI, LDAPBASE, BINDDN, BINDPW, AUTHTYPE, TIMEOUT,
// SIZELIMIT, SCOPE, START_TLS, TLS_VERIFY, TLS_CA_FILE, CACERTIFICATE,
// TLS_VERSION, SERVERPOOL_STRATEGY, SERVERPOOL_SKIP, plus
// HOSTNAMEATTRIBUTE (required), IDATTRIBUTE (default DN), IPATTRIBUTE and
// SEARCHFILTER (default (objectClass=computer)); BINDPW is sealed).
// Parameters not sent stay as stored, an empty value removes one, and
// Censored keeps a stored password; parameters the type does not know
// are ignored. A hosts file must be readable and well-formed. It returns
// the resolver's id. Each of also runs in the same transaction after the
// write.
func (r *Resolvers) Set(ctx context.Context, name string, params map[string]string, also ...func(store.Tx) error) (int, error) {
	if name == "" {
		return 0, apierr.MissingParameter("name")
	}
	if !resolver.ValidName(name) {
		return 0, resolver.ErrBadName
	}
	typ := params["type"]
	if typ == "" {
		return 0, apierr.MissingParameter("type")
	}
	k, err := r.kindOf(typ)
	if err != nil {
		return 0, err
	}
	old, exists, err := r.read(ctx, name)
	if err != nil {
		return 0, err
	}
	if exists && old.Type != typ {
		return 0, typeChanged(name)
	}
	// The configuration as it will be: the stored one with the sent
	// parameters applied.
	cfg := map[string]string{}
	if exists {
		if cfg, err = r.open(old); err != nil {
			return 0, err
		}
	}
	for p, v := range params {
		switch {
		case !k.knows(p):
		case v == Censored:
			if k.password(p) && !exists {
				return 0, apierr.New(apierr.Parameter, fmt.Sprintf("The parameter %s needs a value: %s only stands for a stored one.", p, Censored))
			}
		case v == "":
			delete(cfg, p)
		default:
			cfg[p] = v
		}
	}
	if err := k.validate(r, cfg); err != nil {
		return 0, err
	}
	if typ == TypeHosts {
		// Read the file now: a name that cannot be read is refused here
		// rather than at the first lookup.
		h := newHosts(name, cfg[paramFilename], r.files)
		if _, err := h.load(); err != nil {
			return 0, err
		}
	}
	// Seal before the transaction: Update may run its function more than
	// once.
	data := map[string]string{}
	sealed := map[string][]byte{}
	for p, v := range cfg {
		if !k.password(p) {
			data[p] = v
			continue
		}
		if r.sealer == nil {
			return 0, apierr.New(apierr.ConfigAdmin, "The server has no key to store the password "+p+" with.")
		}
		c, err := r.sealer.Seal([]byte(v), ad(name, p)...)
		if err != nil {
			return 0, err
		}
		sealed[p] = c
	}
	var id int
	err = r.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(resolverBucket)
		var rec record
		switch err := store.GetJSON(b, key(name), &rec); {
		case errors.Is(err, store.ErrNotFound):
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			rec = record{ID: int(seq), Name: name, Type: typ}
		case err != nil:
			return err
		case rec.Type != typ:
			return typeChanged(name)
		}
		rec.Data, rec.Sealed = data, nil
		if len(sealed) > 0 {
			rec.Sealed = sealed
		}
		rev, err := store.BumpConfigRevision(tx)
		if err != nil {
			return err
		}
		rec.Schema, rec.Rev, id = schema, rev, rec.ID
		if err := store.PutJSON(b, key(name), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return 0, fmt.Errorf("machine resolver %s: %w", name, err)
	}
	return id, nil
}

func typeChanged(name string) error {
	return apierr.New(apierr.Parameter, "machine resolver with similar name and other type already exists: "+name)
}

// Definition returns the definition of name (passwords censored); ok is
// false when there is none.
func (r *Resolvers) Definition(ctx context.Context, name string) (Def, bool, error) {
	rec, ok, err := r.read(ctx, name)
	if err != nil || !ok {
		return Def{}, false, err
	}
	return rec.def(), true, nil
}

// List returns the definitions of type typ ("" for all), ordered by name,
// passwords censored.
func (r *Resolvers) List(ctx context.Context, typ string) ([]Def, error) {
	recs, err := r.records(ctx)
	if err != nil {
		return nil, err
	}
	out := []Def{}
	for _, rec := range recs {
		if typ == "" || rec.Type == typ {
			out = append(out, rec.def())
		}
	}
	return out, nil
}

// records reads every definition, ordered by name.
func (r *Resolvers) records(ctx context.Context) ([]record, error) {
	var out []record
	err := r.st.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		return tx.Bucket(resolverBucket).ForEach(nil, func(k, v []byte) error {
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("machine resolver %q: %w", k, err)
			}
			out = append(out, rec)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b record) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete removes the machine resolver name and returns its id; an unknown
// name is ErrResolverNotFound. Each of also runs in the same transaction.
func (r *Resolvers) Delete(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	var id int
	err := r.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(resolverBucket)
		var rec record
		err := store.GetJSON(b, key(name), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return ErrResolverNotFound
		}
		if err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		if err := b.Delete(key(name)); err != nil {
			return err
		}
		id = rec.ID
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	if lb, ok := r.live[strings.ToLower(name)]; ok {
		delete(r.live, strings.ToLower(name))
		lb.b.close()
	}
	r.mu.Unlock()
	return id, nil
}

// Test tries a configuration without saving it: params holds "type" and
// the type's parameters. When stored names a saved resolver of the same
// type, its values fill in the parameters sent as Censored. A hosts
// configuration is not tested (false, "Not Implemented", as in
// privacyIDEA); an LDAP one connects and counts the machines its filter
// finds.
func (r *Resolvers) Test(ctx context.Context, params map[string]string, stored string) (bool, string, error) {
	typ := params["type"]
	if typ == "" {
		return false, "", apierr.MissingParameter("type")
	}
	k, err := r.kindOf(typ)
	if err != nil {
		return false, "", err
	}
	cfg := map[string]string{}
	var storedCfg map[string]string
	if stored != "" {
		rec, ok, err := r.read(ctx, stored)
		if err != nil {
			return false, "", err
		}
		if ok && rec.Type == typ {
			if storedCfg, err = r.open(rec); err != nil {
				return false, "", err
			}
		}
	}
	for p, v := range params {
		if !k.knows(p) || v == "" {
			continue
		}
		if v == Censored {
			if sv, ok := storedCfg[p]; ok {
				cfg[p] = sv
			}
			continue
		}
		cfg[p] = v
	}
	ok, desc := k.test(ctx, r, cfg)
	return ok, desc, nil
}

// Close closes the built resolvers (the LDAP connections). It is
// idempotent.
func (r *Resolvers) Close() error {
	r.mu.Lock()
	live := r.live
	r.live = map[string]liveBackend{}
	r.mu.Unlock()
	for _, lb := range live {
		lb.b.close()
	}
	return nil
}

// backendOf returns the built resolver of rec, building it when the
// record changed since.
func (r *Resolvers) backendOf(ctx context.Context, rec record) (backend, error) {
	lname := strings.ToLower(rec.Name)
	r.mu.Lock()
	lb, ok := r.live[lname]
	r.mu.Unlock()
	if ok && lb.rev == rec.Rev {
		return lb.b, nil
	}
	k, err := r.kindOf(rec.Type)
	if err != nil {
		return nil, err
	}
	cfg, err := r.open(rec)
	if err != nil {
		return nil, err
	}
	b, err := k.build(ctx, r, rec.Name, cfg)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	cur, ok := r.live[lname]
	switch {
	case ok && cur.rev == rec.Rev:
		// Built meanwhile by another caller: keep that one.
		r.mu.Unlock()
		b.close()
		return cur.b, nil
	case ok && cur.rev > rec.Rev:
		// A newer definition is live; answer from ours once.
		r.mu.Unlock()
		return closeAfter{b}, nil
	}
	r.live[lname] = liveBackend{rev: rec.Rev, b: b}
	r.mu.Unlock()
	if ok {
		cur.b.close()
	}
	return b, nil
}

// closeAfter is a backend built for one call only.
type closeAfter struct{ backend }

// MachineFilter selects machines (GET /machine/). Empty fields put no
// condition. Hostname, ID, Resolver and Any match as substrings, ignoring
// case (Any: in a hostname, the id or the IP text); IP must equal the
// machine's address, and a text that is no IP address puts no condition.
type MachineFilter struct {
	Hostname string
	IP       string
	ID       string
	Resolver string
	Any      string
}

// ip is the filter's address (invalid when unset or not an address).
func (f MachineFilter) ip() netip.Addr {
	a, err := netip.ParseAddr(strings.TrimSpace(f.IP))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// match reports whether m passes every condition of f but Resolver.
func (f MachineFilter) match(m Machine) bool {
	if f.ID != "" && !containsFold(m.ID, f.ID) {
		return false
	}
	if f.Hostname != "" && !slices.ContainsFunc(m.Hostname, func(h string) bool { return containsFold(h, f.Hostname) }) {
		return false
	}
	if a := f.ip(); a.IsValid() {
		mip, err := netip.ParseAddr(m.IP)
		if err != nil || mip.Unmap() != a {
			return false
		}
	}
	if f.Any != "" {
		in := containsFold(m.ID, f.Any) || containsFold(m.IP, f.Any) ||
			slices.ContainsFunc(m.Hostname, func(h string) bool { return containsFold(h, f.Any) })
		if !in {
			return false
		}
	}
	return true
}

// Machines lists the machines of every machine resolver that f selects,
// ordered by resolver. A resolver that cannot answer (a hosts file gone,
// a directory down) makes the list an error.
func (r *Resolvers) Machines(ctx context.Context, f MachineFilter) ([]Machine, error) {
	recs, err := r.records(ctx)
	if err != nil {
		return nil, err
	}
	out := []Machine{}
	for _, rec := range recs {
		if f.Resolver != "" && !containsFold(rec.Name, f.Resolver) {
			continue
		}
		b, err := r.backendOf(ctx, rec)
		if err != nil {
			return nil, err
		}
		ms, err := b.machines(ctx, f)
		if _, once := b.(closeAfter); once {
			b.close()
		}
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if f.match(m) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// ByHostname returns the one machine that carries hostname (exactly,
// ignoring case) in any machine resolver. None is an error wrapping
// ErrNoMachine, several one wrapping ErrAmbiguousMachine.
func (r *Resolvers) ByHostname(ctx context.Context, hostname string) (Machine, error) {
	if strings.TrimSpace(hostname) == "" {
		return Machine{}, apierr.MissingParameter("hostname")
	}
	recs, err := r.records(ctx)
	if err != nil {
		return Machine{}, err
	}
	var found []Machine
	for _, rec := range recs {
		b, err := r.backendOf(ctx, rec)
		if err != nil {
			return Machine{}, err
		}
		ms, err := b.named(ctx, hostname)
		if _, once := b.(closeAfter); once {
			b.close()
		}
		if err != nil {
			return Machine{}, err
		}
		found = append(found, ms...)
	}
	switch len(found) {
	case 0:
		return Machine{}, apierr.New(apierr.Parameter, fmt.Sprintf("There is no machine with the hostname %s.", hostname)).Wrap(ErrNoMachine)
	case 1:
		return found[0], nil
	}
	where := make([]string, len(found))
	for i, m := range found {
		where[i] = m.Resolver + "/" + m.ID
	}
	return Machine{}, apierr.New(apierr.Parameter, fmt.Sprintf("The hostname %s names more than one machine (%s).",
		hostname, strings.Join(where, ", "))).Wrap(ErrAmbiguousMachine)
}

// Get returns machine id of the machine resolver resolverName. An unknown
// resolver or id is an error wrapping ErrNoMachine.
func (r *Resolvers) Get(ctx context.Context, resolverName, id string) (Machine, error) {
	none := func() error {
		return apierr.New(apierr.Parameter, fmt.Sprintf("There is no machine %s in the machine resolver %s.", id, resolverName)).Wrap(ErrNoMachine)
	}
	if resolverName == "" || id == "" {
		return Machine{}, none()
	}
	rec, ok, err := r.read(ctx, resolverName)
	if err != nil {
		return Machine{}, err
	}
	if !ok {
		return Machine{}, none()
	}
	b, err := r.backendOf(ctx, rec)
	if err != nil {
		return Machine{}, err
	}
	m, found, err := b.get(ctx, id)
	if _, once := b.(closeAfter); once {
		b.close()
	}
	if err != nil {
		return Machine{}, err
	}
	if !found {
		return Machine{}, none()
	}
	return m, nil
}
