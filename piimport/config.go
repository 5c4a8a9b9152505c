package piimport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/sysconfig"
)

// local is the caller of every import operation: the operator on this
// machine, a trusted local administrator. Each change is audited as any
// other change.
var local = caller.Caller{}

// refusal tells an object the library refused (the import records it as
// not brought over, with the library's reason, and goes on) from a
// failure that must stop the import: a cancelled context, a store that
// cannot be written, an overloaded server.
func refusal(err error) (reason string, ok bool) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, store.ErrWriteFailed) || errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrReadOnly) {
		return "", false
	}
	if e, isAPI := errors.AsType[*apierr.Error](err); isAPI {
		switch e.Code {
		case apierr.Server, apierr.Busy, apierr.StoreWrite, apierr.Database:
			return "", false
		}
		return e.Error(), true
	}
	return err.Error(), true
}

// outcome records the result of one library call: sum.Add with detail on
// success, sum.Skip with the library's reason when it refused the object;
// any other error is returned and stops the import.
func outcome(sum *Summary, kind, name, detail string, err error) error {
	if err == nil {
		sum.Add(kind, name, detail)
		return nil
	}
	reason, ok := refusal(err)
	if !ok {
		return fmt.Errorf("%s %s: %w", kind, name, err)
	}
	sum.Skip(kind, name, reason)
	return nil
}

// relocate rewrites an absolute path through reloc; other values stay.
func relocate(reloc func(string) string, v string) string {
	if reloc == nil || !filepath.IsAbs(v) {
		return v
	}
	return reloc(v)
}

// importConfig brings over what the tokens and the late objects need
// before them, in dependency order: user stores before the realms that
// list them, the default realm, SMTP servers, SMS gateways and RADIUS
// servers before the settings that name them, then the settings, the
// service IDs, the CA connectors and the machine resolvers.
func importConfig(ctx context.Context, o *authsrv.Ops, snap *Snapshot, reloc func(string) string, sum *Summary) error {
	steps := []func(context.Context, *authsrv.Ops, *Snapshot, func(string) string, *Summary) error{
		importResolvers, importRealms, importSMTPServers, importSMSGateways, importRadiusServers,
		importSettings, importServiceIDs, importCAConnectors, importMachineResolvers,
	}
	for _, step := range steps {
		if err := step(ctx, o, snap, reloc, sum); err != nil {
			return err
		}
	}
	return nil
}

// importLate brings over what refers to tokens or must not see the import
// happen: the policies, the custom user attributes, the machine tokens and,
// last, the event handlers, so that no imported object triggers one of
// them.
func importLate(ctx context.Context, o *authsrv.Ops, snap *Snapshot, reloc func(string) string, sum *Summary) error {
	steps := []func(context.Context, *authsrv.Ops, *Snapshot, func(string) string, *Summary) error{
		importPolicies, importAttributes, importMachineTokens, importEvents,
	}
	for _, step := range steps {
		if err := step(ctx, o, snap, reloc, sum); err != nil {
			return err
		}
	}
	return nil
}

// configParams turns a privacyIDEA key/value configuration into the
// parameters of a resolver: each value (absolute paths relocated,
// password values never touched), "type.<key>" for password values so
// that they are sealed whatever the type's defaults say, and
// "desc.<key>" for descriptions.
func configParams(cfg map[string]ConfigValue, reloc func(string) string) map[string]string {
	params := map[string]string{}
	for k, v := range cfg {
		if v.Type == string(resolver.Password) {
			params[k] = v.Value
			params["type."+k] = string(resolver.Password)
		} else {
			params[k] = relocate(reloc, v.Value)
		}
		if v.Description != "" {
			params["desc."+k] = v.Description
		}
	}
	return params
}

// importResolvers brings over the user stores with every parameter and
// their (decrypted, then sealed again) passwords. A type the server does
// not have is refused by the library and recorded.
func importResolvers(ctx context.Context, o *authsrv.Ops, snap *Snapshot, reloc func(string) string, sum *Summary) error {
	for _, r := range snap.Resolvers {
		params := configParams(r.Config, reloc)
		params["type"] = r.Type
		_, err := o.SetResolver(ctx, local, r.Name, params)
		if err := outcome(sum, "resolver", r.Name, r.Type, err); err != nil {
			return err
		}
	}
	return nil
}

// importRealms brings over the realms with their resolvers and
// priorities, the node-specific resolver lists (when the node exists
// here: privacyIDEA's node ids are not authsrv's), and the default realm.
func importRealms(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	for _, r := range snap.Realms {
		all, byNode := realmEntries(r)
		_, failed, err := o.SetRealm(ctx, local, r.Name, all)
		if err := outcome(sum, "realm", r.Name, entriesDetail(all, failed), err); err != nil {
			return err
		}
		if err != nil {
			continue
		}
		for _, node := range slices.Sorted(maps.Keys(byNode)) {
			entries := byNode[node]
			_, failed, err := o.SetRealmNode(ctx, local, r.Name, node, entries)
			if err := outcome(sum, "realm", r.Name+" (node "+node+")", entriesDetail(entries, failed), err); err != nil {
				return err
			}
		}
	}
	for _, r := range snap.Realms {
		if !r.Default {
			continue
		}
		_, err := o.SetDefaultRealm(ctx, local, r.Name)
		if err := outcome(sum, "default realm", r.Name, "", err); err != nil {
			return err
		}
	}
	return nil
}

// realmEntries splits a realm's resolver list into the entries for all
// nodes and those of each node.
func realmEntries(r Realm) (all []realm.Entry, byNode map[string][]realm.Entry) {
	byNode = map[string][]realm.Entry{}
	all = []realm.Entry{}
	for _, rr := range r.Resolvers {
		e := realm.Entry{Name: rr.Resolver}
		if rr.HasPriority {
			p := rr.Priority
			e.Priority = &p
		}
		if rr.Node == "" {
			all = append(all, e)
		} else {
			byNode[rr.Node] = append(byNode[rr.Node], e)
		}
	}
	return all, byNode
}

// entriesDetail is the summary detail of a resolver list, naming the
// resolvers the library did not find (they were not brought over).
func entriesDetail(entries []realm.Entry, failed []string) string {
	parts := make([]string, 0, len(entries))
	for _, e := range entries {
		s := e.Name
		if e.Priority != nil {
			s += " (priority " + strconv.Itoa(*e.Priority) + ")"
		}
		parts = append(parts, s)
	}
	detail := "no resolvers"
	if len(parts) > 0 {
		detail = "resolvers: " + strings.Join(parts, ", ")
	}
	if len(failed) > 0 {
		detail += "; resolvers not brought over: " + strings.Join(failed, ", ")
	}
	return detail
}

// importSMTPServers brings over the SMTP servers, their passwords sealed.
func importSMTPServers(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	for _, m := range snap.SMTPServers {
		d := notify.SMTPServer{
			Identifier: m.Identifier, Server: m.Server, Port: m.Port, Username: m.Username,
			Password: string(m.Password), Sender: m.Sender, TLS: m.TLS, Timeout: m.Timeout,
			Description: m.Description, EnqueueJob: m.EnqueueJob,
		}
		err := o.SetSMTPServer(ctx, local, d)
		detail := m.Server + ":" + strconv.Itoa(m.Port)
		if m.EnqueueJob {
			detail += "; enqueue_job kept, but authsrv sends at once (no job queue)"
		}
		if err := outcome(sum, "smtpserver", m.Identifier, detail, err); err != nil {
			return err
		}
	}
	return nil
}

// smsModule maps privacyIDEA's provider module to the one authsrv knows:
// the same path, or a path with the same class name (a module written
// short, as older releases stored some).
func smsModule(known map[string]notify.ProviderInfo, module string) string {
	if _, ok := known[module]; ok {
		return module
	}
	class := module[strings.LastIndex(module, ".")+1:]
	for _, m := range slices.Sorted(maps.Keys(known)) {
		if strings.HasSuffix(m, "."+class) {
			return m
		}
	}
	return module
}

// smsSecret reports whether an SMS gateway option or header holds a
// credential to seal: passwords, secrets, tokens, API keys and
// authorization headers. privacyIDEA keeps them all in plain text.
func smsSecret(key string) bool {
	k := strings.ToUpper(key)
	for _, w := range []string{"PASSWORD", "SECRET", "TOKEN", "KEY", "AUTHORIZATION"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// importSMSGateways brings over the SMS gateways with their options and
// headers; credentials among them are sealed.
func importSMSGateways(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	if len(snap.SMSGateways) == 0 {
		return nil
	}
	known, err := o.SMSProviders(ctx, local)
	if err != nil {
		return fmt.Errorf("SMS providers: %w", err)
	}
	for _, g := range snap.SMSGateways {
		gw := notify.Gateway{Name: g.Identifier, Module: smsModule(known, g.ProviderModule), Description: g.Description,
			Options: map[string]string{}, Headers: map[string]string{}}
		var skipped []string
		for _, opt := range g.Options {
			switch opt.Type {
			case "option", "":
				gw.Options[opt.Key] = opt.Value
				if smsSecret(opt.Key) {
					gw.SecretOptions = append(gw.SecretOptions, opt.Key)
				}
			case "header":
				gw.Headers[opt.Key] = opt.Value
				if smsSecret(opt.Key) {
					gw.SecretHeaders = append(gw.SecretHeaders, opt.Key)
				}
			default:
				skipped = append(skipped, opt.Key)
			}
		}
		if len(gw.SecretOptions) == 0 && len(gw.SecretHeaders) == 0 {
			// No credential: leave the library's own choice of secrets.
			gw.SecretOptions, gw.SecretHeaders = nil, nil
		}
		_, err := o.SetSMSGateway(ctx, local, gw)
		detail := gw.Module[strings.LastIndex(gw.Module, ".")+1:]
		if len(skipped) > 0 {
			detail += "; options of unknown kind left out: " + strings.Join(skipped, ", ")
		}
		if err := outcome(sum, "smsgateway", g.Identifier, detail, err); err != nil {
			return err
		}
	}
	return nil
}

// importRadiusServers brings over the RADIUS servers, their secrets
// sealed. privacyIDEA's dictionary file is kept in the definition but
// never read: authsrv has the attribute definitions built in.
func importRadiusServers(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	for _, r := range snap.RadiusServers {
		d := notify.RadiusServer{
			Identifier: r.Identifier, Server: r.Server, Port: r.Port, Secret: string(r.Secret),
			Retries: r.Retries, Timeout: r.Timeout, Dictionary: r.Dictionary, Description: r.Description,
		}
		err := o.SetRadiusServer(ctx, local, d)
		detail := r.Server + ":" + strconv.Itoa(r.Port)
		if r.Dictionary != "" {
			detail += "; dictionary " + r.Dictionary + " is privacyIDEA's and ignored (authsrv has the attributes built in)"
		}
		if err := outcome(sum, "radiusserver", r.Identifier, detail, err); err != nil {
			return err
		}
	}
	return nil
}

// importSettings brings over the system settings one by one, so that a
// key authsrv does not know (or a value it refuses) leaves out that key
// alone. No authsrv setting holds a password: such a key is refused.
func importSettings(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	for _, c := range snap.Config {
		if c.Key == "__timestamp__" {
			continue
		}
		if c.Type == "password" {
			sum.Skip("setting", c.Key, "a password setting: no authsrv setting holds a password")
			continue
		}
		_, err := o.SetSystemConfig(ctx, local, []sysconfig.Change{{Key: c.Key, Value: c.Value, Type: c.Type, Desc: c.Description}})
		if err := outcome(sum, "setting", c.Key, c.Value, err); err != nil {
			return err
		}
	}
	return nil
}

// importServiceIDs brings over the service IDs.
func importServiceIDs(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	for _, s := range snap.ServiceIDs {
		_, err := o.SetServiceID(ctx, local, s.Name, s.Description)
		if err := outcome(sum, "serviceid", s.Name, "", err); err != nil {
			return err
		}
	}
	return nil
}

// importCAConnectors brings over the CA connectors: the local CA with its
// file names relocated (its key and certificate must be readable where
// they are now); types authsrv lacks are refused by the library.
func importCAConnectors(ctx context.Context, o *authsrv.Ops, snap *Snapshot, reloc func(string) string, sum *Summary) error {
	for _, c := range snap.CAConnectors {
		params := map[string]string{}
		for k, v := range c.Config {
			if k == "name" || v.Type == "password" {
				// The name is privacyIDEA's copy of the connector's
				// name; no local CA key holds a password.
				continue
			}
			params[k] = relocate(reloc, v.Value)
		}
		_, err := o.SetCAConnector(ctx, local, c.Name, c.Type, params)
		if err := outcome(sum, "caconnector", c.Name, c.Type, err); err != nil {
			return err
		}
	}
	return nil
}

// importMachineResolvers brings over the machine resolvers, the hosts
// file relocated.
func importMachineResolvers(ctx context.Context, o *authsrv.Ops, snap *Snapshot, reloc func(string) string, sum *Summary) error {
	for _, m := range snap.MachineResolvers {
		params := map[string]string{}
		for k, v := range m.Config {
			if v.Type == "password" {
				params[k] = v.Value
			} else {
				params[k] = relocate(reloc, v.Value)
			}
		}
		params["type"] = m.Type
		_, err := o.SetMachineResolver(ctx, local, m.Name, params)
		if err := outcome(sum, "machineresolver", m.Name, m.Type, err); err != nil {
			return err
		}
	}
	return nil
}

// splitList reads one of privacyIDEA's comma-separated policy columns.
func splitList(s string) []string {
	out := []string{}
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// importPolicies brings over the policies with every column, priority,
// active flag, description and conditions. A policy the library refuses
// (an action it does not know, a realm that was not brought over, an
// administrator realm that is not a superuser realm here) is left out
// with the library's reason.
func importPolicies(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	for _, p := range snap.Policies {
		action, dropped, err := knownActions(ctx, o, p.Scope, p.Action)
		if err != nil {
			return err
		}
		if len(dropped) > 0 && strings.TrimSpace(action) == "" {
			sum.Skip("policy", p.Name, "none of its actions exists in authsrv: "+strings.Join(dropped, ", "))
			continue
		}
		pol := policy.Policy{
			Name: p.Name, Scope: p.Scope, Priority: p.Priority, Description: p.Description, Action: action,
			Realm: splitList(p.Realm), Resolver: splitList(p.Resolver), User: splitList(p.User),
			AdminRealm: splitList(p.AdminRealm), AdminUser: splitList(p.AdminUser), Client: splitList(p.Client),
			PINode: splitList(p.PINode), UserAgents: []string{}, Time: p.Time, Active: p.Active,
			CheckAllResolvers: p.CheckAllResolvers, UserCaseInsensitive: p.UserCaseInsens,
			Conditions: []policy.Condition{},
		}
		if pol.Priority == 0 {
			// A NULL priority: privacyIDEA's default.
			pol.Priority = 1
		}
		for _, c := range p.Conditions {
			pol.Conditions = append(pol.Conditions, policy.Condition{Section: c.Section, Key: c.Key,
				Comparator: c.Comparator, Value: c.Value, Active: c.Active})
		}
		_, err = o.SetPolicy(ctx, local, pol)
		detail := p.Scope
		if !p.Active {
			detail += ", inactive"
		}
		if n := len(p.Conditions); n > 0 {
			detail += ", " + strconv.Itoa(n) + " condition(s)"
		}
		if len(dropped) > 0 {
			detail += "; without the actions authsrv does not have: " + strings.Join(dropped, ", ")
		}
		if err := outcome(sum, "policy", p.Name, detail, err); err != nil {
			return err
		}
	}
	return nil
}

// importAttributes brings over the custom user attributes. privacyIDEA
// names the user by resolver and uid: the login is found through the
// user store (the realm's, or any realm holding the resolver when the
// attribute names none).
func importAttributes(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	type userKey struct{ resolver, uid, realm string }
	found := map[userKey]authsrv.UserListed{}
	for _, a := range snap.Attributes {
		name := a.Resolver + "/" + a.UserID + ": " + a.Key
		k := userKey{a.Resolver, a.UserID, a.Realm}
		u, ok := found[k]
		if !ok {
			req := authsrv.UserListRequest{Resolver: a.Resolver, Filter: map[string]string{resolver.KeyUserID: a.UserID}, NoCustom: true}
			if a.Realm != "" {
				req.Realms = []string{a.Realm}
			}
			users, err := o.ListUsers(ctx, local, req)
			if reason, skip := refusal(err); err != nil && !skip {
				return fmt.Errorf("userattribute %s: %w", name, err)
			} else if err != nil {
				sum.Skip("userattribute", name, "the user cannot be looked up: "+reason)
				continue
			}
			i := slices.IndexFunc(users, func(l authsrv.UserListed) bool {
				return l.Resolver == a.Resolver && l.Info.String(resolver.KeyUserID) == a.UserID
			})
			if i < 0 {
				sum.Skip("userattribute", name, "no user with uid "+a.UserID+" in resolver "+a.Resolver)
				continue
			}
			u = users[i]
			found[k] = u
		}
		login := u.Info.String(resolver.KeyUsername)
		name = login + "@" + u.Realm + ": " + a.Key
		_, err := o.SetUserAttribute(ctx, local, authsrv.AttributeRequest{User: login, Realm: u.Realm, Resolver: a.Resolver,
			Key: a.Key, Value: a.Value, Type: a.Type})
		if err := outcome(sum, "userattribute", name, "", err); err != nil {
			return err
		}
	}
	return nil
}

// importMachineTokens brings over the machine tokens: SSH keys bound by
// service ID alone, and tokens bound to a machine of a machine resolver
// (ssh, offline, luks), each with its options.
func importMachineTokens(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	for _, m := range snap.MachineTokens {
		req := machine.AttachRequest{Serial: m.Serial, Application: m.Application, Options: maps.Clone(m.Options)}
		if req.Options == nil {
			req.Options = map[string]string{}
		}
		var detail string
		if m.MachineID == "" && m.MachineResolver == "" {
			detail = m.Application + " on no particular machine"
		} else {
			req.Machine = machine.MachineRef{MachineID: m.MachineID, Resolver: m.MachineResolver}
			detail = m.Application + " on machine " + m.MachineID + " of " + m.MachineResolver
		}
		if sid := m.Options["service_id"]; sid != "" {
			detail += ", service ID " + sid
		}
		if u := m.Options["user"]; u != "" {
			detail += ", user " + u
		}
		_, err := o.AttachMachineToken(ctx, local, req)
		if err := outcome(sum, "machinetoken", m.Serial, detail, err); err != nil {
			return err
		}
	}
	return nil
}

// importEvents brings over the event handlers with their conditions and
// options. privacyIDEA 3.10 stores a comparator with each condition but
// evaluates the condition by its key alone, as authsrv does.
func importEvents(ctx context.Context, o *authsrv.Ops, snap *Snapshot, _ func(string) string, sum *Summary) error {
	events := slices.Clone(snap.Events)
	slices.SortStableFunc(events, func(a, b EventHandler) int {
		return cmp.Or(cmp.Compare(a.Ordering, b.Ordering), cmp.Compare(a.ID, b.ID))
	})
	for _, e := range events {
		d := eventing.Definition{
			Name: e.Name, Active: e.Active, Ordering: e.Ordering, Position: e.Position,
			HandlerModule: e.HandlerModule, Action: e.Action, Events: splitList(e.Event),
			Options: map[string]string{}, Conditions: map[string]string{},
		}
		for _, c := range e.Conditions {
			d.Conditions[c.Key] = c.Value
		}
		for _, opt := range e.Options {
			d.Options[opt.Key] = opt.Value
		}
		_, err := o.SetEventDefinition(ctx, local, d, false)
		detail := e.HandlerModule + " " + e.Action + " on " + strings.Join(d.Events, ", ")
		if !e.Active {
			detail += ", inactive"
		}
		if err := outcome(sum, "eventhandler", e.Name, detail, err); err != nil {
			return err
		}
	}
	return nil
}

// grantScopes are the scopes whose boolean actions only grant: an
// administrator's or a user's rights, and the web UI's display settings.
// Leaving out such an action that authsrv does not know (the right to
// enroll a token type it lacks, a setting of privacyIDEA's own web UI)
// grants nothing and restricts nothing that exists here; in every other
// scope an unknown action could be a restriction, so such a policy is
// refused as a whole rather than imported looser.
var grantScopes = map[string]bool{policy.ScopeAdmin: true, policy.ScopeUser: true, "webui": true}

// knownActions returns the policy's action string without the actions
// that may be left out (see grantScopes), and their names. Anything else
// stays, for SetPolicy to accept or refuse.
func knownActions(ctx context.Context, o *authsrv.Ops, scope, action string) (string, []string, error) {
	if !grantScopes[scope] {
		return action, nil, nil
	}
	defs, err := o.PolicyDefs(ctx, local, scope)
	if err != nil {
		return "", nil, fmt.Errorf("policy definitions of scope %s: %w", scope, err)
	}
	known, _ := defs.(map[string]any)
	if len(known) == 0 {
		return action, nil, nil
	}
	acts := policy.ParseActions(action)
	var dropped []string
	for k, v := range acts {
		name := strings.TrimPrefix(k, "!")
		if _, ok := known[name]; ok || name == "*" {
			continue
		}
		if b, isBool := v.(bool); (isBool && b) || scope == "webui" {
			dropped = append(dropped, name)
			delete(acts, k)
		}
	}
	if len(dropped) == 0 {
		return action, nil, nil
	}
	slices.Sort(dropped)
	return policy.FormatActions(acts), dropped, nil
}
