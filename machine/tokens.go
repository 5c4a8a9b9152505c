package machine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// Buckets of the machine tokens: the bindings by id, and an index of
// them by serial (serial NUL id -> empty).
const (
	bindingBucket      = "machinetokens"
	bindingSerialIndex = "machinetokens_serial"
)

// bindingSchema is the version of the stored binding records.
const bindingSchema = 1

// Limits of one binding's options.
const (
	maxBindingOptions     = 50
	maxBindingOptionKey   = 128
	maxBindingOptionValue = 4096
)

// The placeholders privacyIDEA shows for a binding without a machine.
const (
	// AnyMachine is the machine id of a binding without a machine; in a
	// detach with NoResolver it selects every binding of the token and
	// application, and in a list it selects every machine.
	AnyMachine = "any machine"
	// NoResolver is the resolver of a binding without a machine.
	NoResolver = "no resolver"
	// AnyHost is the hostname of a binding without a machine.
	AnyHost = "any host"
	// UnknownHost is the hostname of a binding whose machine no resolver
	// lists any more.
	UnknownHost = "unknown"
)

// Errors of the machine tokens.
var (
	// ErrBindingNotFound: no machine token matches the selection.
	ErrBindingNotFound = apierr.New(apierr.ResourceNotFound, "The requested MachineToken could not be found.")
	// ErrTokenNotFound is the answer of a token list for an unknown serial.
	ErrTokenNotFound = apierr.New(apierr.ResourceNotFound, "The requested Token could not be found.")
	// ErrIncompleteMachine: a machine named by only one of machineid and
	// resolver.
	ErrIncompleteMachine = apierr.New(apierr.Parameter, "Give the hostname, or the machineid and the resolver of the machine.")
	// errNoFinder: no machine resolvers are wired in.
	errNoFinder = apierr.New(apierr.Parameter, "There are no machine resolvers to find the machine in.")
)

// errNoToken is privacyIDEA's answer when a token to attach is unknown.
func errNoToken(serial string) error {
	return apierr.New(apierr.ResourceNotFound, "Token with serial "+serial+" does not exist.")
}

// Binding is one machine token: a token attached to a machine (MachineID
// and Resolver set) or, with both empty, to no machine (the ssh and
// offline applications then select it by its service_id option), for
// one application, with the application's options.
type Binding struct {
	ID          int
	Serial      string
	MachineID   string
	Resolver    string
	Application string
	Options     map[string]string
}

// HasMachine reports whether the binding names a machine.
func (b Binding) HasMachine() bool { return b.MachineID != "" || b.Resolver != "" }

type bindingRecord struct {
	store.Versioned
	ID          int               `json:"id"`
	Serial      string            `json:"serial"`
	MachineID   string            `json:"machine_id,omitempty"`
	Resolver    string            `json:"resolver,omitempty"`
	Application string            `json:"application"`
	Options     map[string]string `json:"options,omitempty"`
}

func (r bindingRecord) binding() Binding {
	opts := make(map[string]string, len(r.Options))
	for k, v := range r.Options {
		opts[k] = v
	}
	return Binding{ID: r.ID, Serial: r.Serial, MachineID: r.MachineID, Resolver: r.Resolver, Application: r.Application, Options: opts}
}

// TokenSource reads tokens (the token service).
type TokenSource interface {
	// Get returns the token serial, or an error of kind
	// apierr.ResourceNotFound when there is none.
	Get(ctx context.Context, serial string) (*token.Token, error)
}

var _ TokenSource = (*token.Service)(nil)

// txExister is implemented by token sources that can tell, inside a
// store transaction, whether a token exists (*token.Service does).
type txExister interface {
	ExistsTx(tx store.Tx, serial string) bool
}

var _ txExister = (*token.Service)(nil)

// TokensConfig holds the dependencies of Tokens.
type TokensConfig struct {
	Store store.Store
	// Tokens reads the tokens that bindings name.
	Tokens TokenSource
	// Machines finds machines by hostname or id; nil refuses every
	// binding to a machine.
	Machines Finder
	// Apps is the application registry.
	Apps *Apps
}

// Tokens keeps the machine tokens: which token serves which application
// on which machine or service ID, with which options, and answers the
// authentication items of the applications.
type Tokens struct {
	cfg TokensConfig
	// has is, per application, whether any token is attached to it, at
	// one configuration revision (HasBindings).
	has store.RevCache[bool]
}

// NewTokens returns the machine token service.
func NewTokens(cfg TokensConfig) *Tokens {
	if cfg.Apps == nil {
		cfg.Apps = NewApps()
	}
	return &Tokens{cfg: cfg}
}

// Apps returns the application registry.
func (s *Tokens) Apps() *Apps { return s.cfg.Apps }

// SetFinder sets the machine finder (the root wires the machine
// resolvers in after building both). Call it before the service is used.
func (s *Tokens) SetFinder(f Finder) { s.cfg.Machines = f }

// MachineRef names a machine: by Hostname, or by MachineID and Resolver.
// All empty names no machine.
type MachineRef struct {
	Hostname  string
	MachineID string
	Resolver  string
}

// empty reports whether the reference names no machine.
func (m MachineRef) empty() bool { return m.Hostname == "" && m.MachineID == "" && m.Resolver == "" }

// resolve finds the machine m names and returns its id and resolver; ok
// is false when m names none. check asks the resolvers whether a machine
// named by id exists.
func (s *Tokens) resolve(ctx context.Context, m MachineRef, check bool) (id, resolverName string, ok bool, err error) {
	switch {
	case m.empty():
		return "", "", false, nil
	case m.Hostname != "":
		if s.cfg.Machines == nil {
			return "", "", false, errNoFinder
		}
		mc, err := s.cfg.Machines.ByHostname(ctx, m.Hostname)
		if err != nil {
			return "", "", false, err
		}
		return mc.ID, mc.Resolver, true, nil
	case m.MachineID == "" || m.Resolver == "":
		return "", "", false, ErrIncompleteMachine
	}
	if check {
		if s.cfg.Machines == nil {
			return "", "", false, errNoFinder
		}
		if _, err := s.cfg.Machines.Get(ctx, m.Resolver, m.MachineID); err != nil {
			return "", "", false, err
		}
	}
	return m.MachineID, m.Resolver, true, nil
}

// checkOptions refuses options beyond the limits.
func checkOptions(opts map[string]string) error {
	if len(opts) > maxBindingOptions {
		return apierr.Newf(apierr.Parameter, "A machine token has at most %d options.", maxBindingOptions)
	}
	for k, v := range opts {
		if k == "" || len(k) > maxBindingOptionKey || !utf8.ValidString(k) {
			return apierr.Newf(apierr.Parameter, "An option name must be valid text of 1 to %d bytes.", maxBindingOptionKey)
		}
		if len(v) > maxBindingOptionValue || !utf8.ValidString(v) {
			return apierr.Newf(apierr.Parameter, "The option %s must be valid text of at most %d bytes.", k, maxBindingOptionValue)
		}
	}
	return nil
}

// AttachRequest attaches a token to a machine for an application.
type AttachRequest struct {
	Serial      string
	Application string
	// Machine names the machine; empty: no machine (a binding the
	// service_id option selects).
	Machine MachineRef
	// Options are the binding's options.
	Options map[string]string
}

// Attach stores a new binding and returns its id. The token must exist
// (else 404 "Token with serial ... does not exist."), the application be
// registered, and a named machine be known to the machine resolvers.
// Each of also runs in the same transaction after the write.
func (s *Tokens) Attach(ctx context.Context, req AttachRequest, also ...func(store.Tx) error) (int, error) {
	if req.Serial == "" {
		return 0, apierr.MissingParameter("serial")
	}
	if req.Application == "" {
		return 0, apierr.MissingParameter("application")
	}
	if _, err := s.token(ctx, req.Serial); err != nil {
		return 0, err
	}
	if _, ok := s.cfg.Apps.Get(req.Application); !ok {
		return 0, s.cfg.Apps.errUnknownApp(req.Application)
	}
	if err := checkOptions(req.Options); err != nil {
		return 0, err
	}
	id, res, _, err := s.resolve(ctx, req.Machine, true)
	if err != nil {
		return 0, err
	}
	var out int
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		// Checked again in this transaction: a token deleted since the
		// check above takes its bindings with it (token.Service.OnRemove),
		// and none may be written after that.
		if ex, ok := s.cfg.Tokens.(txExister); ok && !ex.ExistsTx(tx, req.Serial) {
			return errNoToken(req.Serial)
		}
		b := tx.Bucket(bindingBucket)
		n, err := b.NextSequence()
		if err != nil {
			return err
		}
		rec := bindingRecord{Versioned: store.Versioned{Schema: bindingSchema}, ID: int(n), Serial: req.Serial,
			MachineID: id, Resolver: res, Application: req.Application, Options: req.Options}
		if err := putBinding(tx, rec); err != nil {
			return err
		}
		out = rec.ID
		return runAlso(tx, also)
	})
	return out, err
}

// token reads the token serial; an unknown serial is privacyIDEA's 404.
func (s *Tokens) token(ctx context.Context, serial string) (*token.Token, error) {
	t, err := s.cfg.Tokens.Get(ctx, serial)
	if err != nil {
		if apierr.Is(err, apierr.ResourceNotFound) {
			return nil, errNoToken(serial)
		}
		return nil, err
	}
	return t, nil
}

func serialKey(serial string, id int) []byte {
	k := append([]byte(serial), 0)
	return append(k, store.Uint64Key(uint64(id))...)
}

// putBinding writes rec and bumps the configuration revision: the
// bindings are configuration (HasBindings keeps its answers per revision).
func putBinding(tx store.Tx, rec bindingRecord) error {
	if err := store.PutJSON(tx.Bucket(bindingBucket), store.Uint64Key(uint64(rec.ID)), rec); err != nil {
		return err
	}
	if err := tx.Bucket(bindingSerialIndex).Put(serialKey(rec.Serial, rec.ID), []byte{}); err != nil {
		return err
	}
	_, err := store.BumpConfigRevision(tx)
	return err
}

// deleteBinding deletes rec and bumps the configuration revision.
func deleteBinding(tx store.Tx, rec bindingRecord) error {
	if err := tx.Bucket(bindingBucket).Delete(store.Uint64Key(uint64(rec.ID))); err != nil {
		return err
	}
	if err := tx.Bucket(bindingSerialIndex).Delete(serialKey(rec.Serial, rec.ID)); err != nil {
		return err
	}
	_, err := store.BumpConfigRevision(tx)
	return err
}

// HasBindings reports whether any token is attached to application app.
// The answer is kept per configuration revision, which every change of a
// binding bumps: a request pinned to a revision (store.WithRevision) gets
// it without a store read once it is known. The authentication hot path
// asks it before it looks for a token's offline binding, which most sites
// never make.
func (s *Tokens) HasBindings(ctx context.Context, app string) (bool, error) {
	if rev, ok := store.RevisionFrom(ctx); ok {
		if has, ok := s.has.GetAt(rev, app); ok {
			return has, nil
		}
	}
	var has bool
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		if v, ok := s.has.Get(tx, app); ok {
			has = v
			return nil
		}
		all, err := allBindings(tx)
		if err != nil {
			return err
		}
		has = slices.ContainsFunc(all, func(r bindingRecord) bool { return r.Application == app })
		s.has.Put(tx, app, has)
		return nil
	})
	return has, err
}

// allBindings decodes every binding in id order.
func allBindings(tx store.Tx) ([]bindingRecord, error) {
	var out []bindingRecord
	b := tx.Bucket(bindingBucket)
	err := b.ForEach(nil, func(k, _ []byte) error {
		var rec bindingRecord
		if err := store.GetJSON(b, k, &rec); err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// bindingsOf decodes the bindings of serial in id order.
func bindingsOf(tx store.Tx, serial string) ([]bindingRecord, error) {
	var ids [][]byte
	prefix := append([]byte(serial), 0)
	err := tx.Bucket(bindingSerialIndex).ForEach(prefix, func(k, _ []byte) error {
		ids = append(ids, bytes.Clone(k[len(prefix):]))
		return nil
	})
	if err != nil {
		return nil, err
	}
	b := tx.Bucket(bindingBucket)
	out := make([]bindingRecord, 0, len(ids))
	for _, id := range ids {
		var rec bindingRecord
		if err := store.GetJSON(b, id, &rec); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// getBinding decodes the binding id; found is false when it is missing.
func getBinding(tx store.Tx, id int) (bindingRecord, bool, error) {
	var rec bindingRecord
	if id <= 0 {
		return rec, false, nil
	}
	err := store.GetJSON(tx.Bucket(bindingBucket), store.Uint64Key(uint64(id)), &rec)
	if errors.Is(err, store.ErrNotFound) {
		return rec, false, nil
	}
	return rec, err == nil, err
}

// RemoveSerialTx removes every binding of serial in tx: the token
// service runs it in the transaction that deletes the token.
func (s *Tokens) RemoveSerialTx(tx store.Tx, serial string) error {
	recs, err := bindingsOf(tx, serial)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := deleteBinding(tx, rec); err != nil {
			return err
		}
	}
	return nil
}

// DetachRequest selects the bindings to remove: the binding ID (which
// must belong to Serial and Application), or every binding of Serial and
// Application on Machine. Machine.MachineID AnyMachine with
// Machine.Resolver NoResolver selects every binding of the token and
// application, with or without a machine; an empty Machine selects the
// bindings without a machine. Options, when set, must all equal the
// binding's.
type DetachRequest struct {
	Serial      string
	Application string
	ID          int
	Machine     MachineRef
	Options     map[string]string
}

// Detach removes the selected bindings and returns how many it removed.
// Each of also runs in the same transaction after the write.
func (s *Tokens) Detach(ctx context.Context, req DetachRequest, also ...func(store.Tx) error) (int, error) {
	if req.Serial == "" {
		return 0, apierr.MissingParameter("serial")
	}
	if req.Application == "" {
		return 0, apierr.MissingParameter("application")
	}
	all := req.ID == 0 && req.Machine.MachineID == AnyMachine && req.Machine.Resolver == NoResolver && req.Machine.Hostname == ""
	var id, res string
	var named bool
	if req.ID == 0 && !all {
		var err error
		if id, res, named, err = s.resolve(ctx, req.Machine, false); err != nil {
			return 0, err
		}
	}
	n := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		n = 0
		recs, err := bindingsOf(tx, req.Serial)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			switch {
			case rec.Application != req.Application:
				continue
			case req.ID != 0 && rec.ID != req.ID:
				continue
			case req.ID == 0 && !all && (named != (rec.MachineID != "" || rec.Resolver != "") || rec.MachineID != id || rec.Resolver != res):
				continue
			case !optionsMatchExact(rec.Options, req.Options):
				continue
			}
			if err := deleteBinding(tx, rec); err != nil {
				return err
			}
			n++
		}
		return runAlso(tx, also)
	})
	return n, err
}

func optionsMatchExact(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// OptionRequest sets and deletes options of the selected bindings: the
// binding ID, or every binding of Serial and Application on Machine (an
// empty Machine: the bindings without a machine).
type OptionRequest struct {
	ID          int
	Serial      string
	Application string
	Machine     MachineRef
	// Set are the options to add or change.
	Set map[string]string
	// Delete are the option names to remove.
	Delete []string
}

// SetOptions changes the options of the selected bindings and returns,
// as privacyIDEA does, the number of options asked to be set and to be
// deleted. No binding selected is ErrBindingNotFound. Each of also runs
// in the same transaction after the write.
func (s *Tokens) SetOptions(ctx context.Context, req OptionRequest, also ...func(store.Tx) error) (added, deleted int, err error) {
	if err := checkOptions(req.Set); err != nil {
		return 0, 0, err
	}
	var id, res string
	var named bool
	if req.ID == 0 {
		if req.Serial == "" {
			return 0, 0, apierr.MissingParameter("serial")
		}
		if req.Application == "" {
			return 0, 0, apierr.MissingParameter("application")
		}
		if id, res, named, err = s.resolve(ctx, req.Machine, false); err != nil {
			return 0, 0, err
		}
	}
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var recs []bindingRecord
		if req.ID != 0 {
			rec, found, err := getBinding(tx, req.ID)
			if err != nil {
				return err
			}
			if found {
				recs = append(recs, rec)
			}
		} else {
			all, err := bindingsOf(tx, req.Serial)
			if err != nil {
				return err
			}
			for _, rec := range all {
				if rec.Application == req.Application && named == (rec.MachineID != "" || rec.Resolver != "") &&
					rec.MachineID == id && rec.Resolver == res {
					recs = append(recs, rec)
				}
			}
		}
		if len(recs) == 0 {
			return ErrBindingNotFound
		}
		for _, rec := range recs {
			if rec.Options == nil {
				rec.Options = map[string]string{}
			}
			for k, v := range req.Set {
				rec.Options[k] = v
			}
			for _, k := range req.Delete {
				delete(rec.Options, k)
			}
			if err := checkOptions(rec.Options); err != nil {
				return err
			}
			rec.Schema = bindingSchema
			if err := putBinding(tx, rec); err != nil {
				return err
			}
		}
		return runAlso(tx, also)
	})
	if err != nil {
		return 0, 0, err
	}
	return len(req.Set), len(req.Delete), nil
}

// TokenMachine is one binding of a token as the token's machine list
// shows it: placeholders for a binding without a machine, and the
// machine's first hostname.
type TokenMachine struct {
	Binding
	// Hostname is the machine's first hostname, AnyHost without a
	// machine, UnknownHost when no resolver lists the machine.
	Hostname string
}

// OfToken lists the bindings of the token serial (ErrTokenNotFound when
// there is no such token), in id order. MachineID and Resolver of a
// binding without a machine are AnyMachine and NoResolver.
func (s *Tokens) OfToken(ctx context.Context, serial string) ([]TokenMachine, error) {
	if _, err := s.cfg.Tokens.Get(ctx, serial); err != nil {
		if apierr.Is(err, apierr.ResourceNotFound) {
			return nil, ErrTokenNotFound
		}
		return nil, err
	}
	var recs []bindingRecord
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		var err error
		recs, err = bindingsOf(tx, serial)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TokenMachine, 0, len(recs))
	for _, rec := range recs {
		tm := TokenMachine{Binding: rec.binding(), Hostname: AnyHost}
		if rec.MachineID == "" && rec.Resolver == "" {
			tm.MachineID, tm.Resolver = AnyMachine, NoResolver
		} else {
			tm.Hostname = UnknownHost
			if s.cfg.Machines != nil {
				if m, err := s.cfg.Machines.Get(ctx, rec.Resolver, rec.MachineID); err == nil && len(m.Hostname) > 0 {
					tm.Hostname = m.Hostname[0]
				}
			}
		}
		out = append(out, tm)
	}
	return out, nil
}

// Query selects machine tokens.
type Query struct {
	// Machine restricts the list to one machine (empty: all; MachineID
	// AnyMachine: all). A "service_id" in Options overrules it.
	Machine MachineRef
	// Application restricts the list to one application.
	Application string
	// Serial restricts the list to one token; with a '*' it is a pattern
	// matched case-insensitively from the serial's start ('*' matches any
	// text).
	Serial string
	// Options are option filters: the binding's option must equal the
	// value, or, when the value has a '*', match it as Serial does. A
	// missing option counts as "".
	Options map[string]string
	// SortBy is "serial" (default) or an option name; Desc reverses.
	SortBy string
	Desc   bool
}

// Listed is one binding of a machine token list.
type Listed struct {
	Binding
	// Type is the token's type.
	Type string
}

// ListResult is a machine token list.
type ListResult struct {
	// MachineID and Resolver echo the machine the query named (nil when
	// it named none or a service_id overruled it).
	MachineID, Resolver *string
	Tokens              []Listed
}

// wildcard compiles a privacyIDEA wildcard: '*' matches any text, the
// rest literally, case-insensitively, anchored at the start only.
func wildcard(p string) *regexp.Regexp {
	parts := strings.Split(p, "*")
	for i, part := range parts {
		parts[i] = regexp.QuoteMeta(part)
	}
	return regexp.MustCompile("(?is)^" + strings.Join(parts, ".*"))
}

// List returns the machine tokens q selects, with their token types
// (bindings whose token no longer exists are left out).
func (s *Tokens) List(ctx context.Context, q Query) (ListResult, error) {
	var res ListResult
	filterMachine := false
	var id, rname string
	if _, ok := q.Options["service_id"]; !ok && !q.Machine.empty() && q.Machine.MachineID != AnyMachine {
		var err error
		if id, rname, filterMachine, err = s.resolve(ctx, q.Machine, false); err != nil {
			return res, err
		}
		res.MachineID, res.Resolver = &id, &rname
	} else if q.Machine.MachineID != "" {
		mid, r := q.Machine.MachineID, q.Machine.Resolver
		res.MachineID = &mid
		if r != "" {
			res.Resolver = &r
		}
	}
	var serialRe *regexp.Regexp
	if strings.Contains(q.Serial, "*") {
		serialRe = wildcard(q.Serial)
	}
	optRe := map[string]*regexp.Regexp{}
	for k, v := range q.Options {
		if strings.Contains(v, "*") {
			optRe[k] = wildcard(v)
		}
	}
	var recs []bindingRecord
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		var err error
		if q.Serial != "" && serialRe == nil {
			recs, err = bindingsOf(tx, q.Serial)
		} else {
			recs, err = allBindings(tx)
		}
		return err
	})
	if err != nil {
		return res, err
	}
	types := map[string]string{}
	res.Tokens = []Listed{}
	for _, rec := range recs {
		switch {
		case filterMachine && (rec.MachineID != id || rec.Resolver != rname):
			continue
		case q.Application != "" && rec.Application != q.Application:
			continue
		case serialRe != nil && !serialRe.MatchString(rec.Serial):
			continue
		}
		match := true
		for k, v := range q.Options {
			have := rec.Options[k]
			if re := optRe[k]; re != nil {
				match = re.MatchString(have)
			} else {
				match = have == v
			}
			if !match {
				break
			}
		}
		if !match {
			continue
		}
		typ, seen := types[rec.Serial]
		if !seen {
			t, err := s.cfg.Tokens.Get(ctx, rec.Serial)
			switch {
			case err == nil:
				typ = t.Type
			case apierr.Is(err, apierr.ResourceNotFound):
			default:
				return res, err
			}
			types[rec.Serial] = typ
		}
		if typ == "" {
			continue
		}
		res.Tokens = append(res.Tokens, Listed{Binding: rec.binding(), Type: typ})
	}
	sortBy := q.SortBy
	if sortBy == "" {
		sortBy = "serial"
	}
	slices.SortStableFunc(res.Tokens, func(a, b Listed) int {
		var c int
		if sortBy == "serial" {
			c = strings.Compare(a.Serial, b.Serial)
		} else {
			c = strings.Compare(a.Options[sortBy], b.Options[sortBy])
		}
		if q.Desc {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(a.ID, b.ID))
	})
	return res, nil
}

// AuthItems returns the authentication items of the machine tokens req
// selects, per application: the tokens of req.Hostname's machine (or of
// the service ID a "service_id" filter names), of req.Application when
// set, filtered by req.Filter as options. Each item carries its
// binding's options and "serial" (req.Serial, or nil). Nothing selected
// is an empty map.
func (s *Tokens) AuthItems(ctx context.Context, req AuthItemRequest) (map[string][]map[string]any, error) {
	if req.Hostname == "" {
		return nil, apierr.MissingParameter("hostname")
	}
	if req.Application != "" {
		if _, ok := s.cfg.Apps.Get(req.Application); !ok {
			return nil, s.cfg.Apps.errUnknownApp(req.Application)
		}
	}
	list, err := s.List(ctx, Query{Machine: MachineRef{Hostname: req.Hostname}, Application: req.Application,
		Serial: req.Serial, Options: req.Filter})
	if err != nil {
		return nil, err
	}
	out := map[string][]map[string]any{}
	for _, l := range list.Tokens {
		app, ok := s.cfg.Apps.Get(l.Application)
		if !ok {
			continue
		}
		t, err := s.cfg.Tokens.Get(ctx, l.Serial)
		if err != nil {
			if apierr.Is(err, apierr.ResourceNotFound) {
				continue
			}
			return nil, err
		}
		item, ok, err := app.AuthItem(ctx, l.Binding, t, req)
		if err != nil {
			return nil, fmt.Errorf("machine token %d (%s): %w", l.ID, l.Application, err)
		}
		if !ok {
			continue
		}
		if item == nil {
			item = map[string]any{}
		}
		for k, v := range l.Options {
			item[k] = v
		}
		if req.Serial != "" {
			item["serial"] = req.Serial
		} else {
			item["serial"] = nil
		}
		out[l.Application] = append(out[l.Application], item)
	}
	return out, nil
}
