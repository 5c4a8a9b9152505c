package authsrv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
)

// Rights of the configuration reads and tests (admin scope), as the HTTP
// routes checked them before they moved into the library.
const (
	rightResolverRead = "resolverread"
	rightPolicyRead   = "policyread"
	rightSMTPRead     = "smtpserver_read"
	rightSMSRead      = "smsgateway_read"
	rightRadiusRead   = "radiusserver_read"
)

// readConfig runs an administrators' configuration read or test: right
// (none: any administrator) on the target t, event, and fn, which
// changes nothing.
func (o *Ops) readConfig(ctx context.Context, who caller.Caller, event, action, right string, t Target, fn func(ctx context.Context, r *opRun) error) error {
	return o.run(ctx, who, opSpec{event: event, action: action, right: adminRight(who, right), target: t},
		func(ctx context.Context, r *opRun) error {
			if !who.IsAdmin() {
				return errAdminOnly
			}
			return fn(ctx, r)
		})
}

// RealmInfo is a realm as the realm reads answer it.
type RealmInfo struct {
	realm.Realm
	// Default marks the default realm.
	Default bool
	// ResolverTypes maps the realm's resolvers to their types (a
	// resolver that no longer exists is missing).
	ResolverTypes map[string]string
}

// realmInfo completes r with its resolvers' types.
func (o *Ops) realmInfo(ctx context.Context, r realm.Realm, isDefault bool) RealmInfo {
	ri := RealmInfo{Realm: r, Default: isDefault, ResolverTypes: map[string]string{}}
	for _, e := range r.Resolvers {
		if d, ok, err := o.s.resolvers.Get(ctx, e.Name); err == nil && ok {
			ri.ResolverTypes[e.Name] = d.Type
		}
	}
	return ri
}

// Realms lists the realms an administrator may see (RealmFilter; event
// get_realms).
func (o *Ops) Realms(ctx context.Context, who caller.Caller) ([]RealmInfo, error) {
	var out []RealmInfo
	err := o.readConfig(ctx, who, "get_realms", "GET /realm/", "", Target{}, func(ctx context.Context, r *opRun) error {
		list, def, err := o.s.realms.List(ctx)
		if err != nil {
			return err
		}
		only, err := o.RealmFilter(ctx, who)
		if err != nil {
			return err
		}
		out = []RealmInfo{}
		for _, rl := range list {
			if only != nil && !slices.Contains(only, rl.Name) {
				continue
			}
			out = append(out, o.realmInfo(ctx, rl, rl.Name == def))
		}
		return nil
	})
	return out, err
}

// DefaultRealm reads the default realm (event get_default_realm); ok is
// false when none is set.
func (o *Ops) DefaultRealm(ctx context.Context, who caller.Caller) (ri RealmInfo, ok bool, err error) {
	err = o.readConfig(ctx, who, "get_default_realm", "GET /defaultrealm", "", Target{}, func(ctx context.Context, r *opRun) error {
		def, err := o.s.realms.Default(ctx)
		if err != nil || def == "" {
			return err
		}
		rl, found, err := o.s.realms.Get(ctx, def)
		if err != nil || !found {
			return err
		}
		ri, ok = o.realmInfo(ctx, rl, true), true
		return nil
	})
	return ri, ok, err
}

// SuperuserRealms lists the realms whose users are administrators (event
// get_superuser_realms).
func (o *Ops) SuperuserRealms(ctx context.Context, who caller.Caller) ([]string, error) {
	var out []string
	err := o.readConfig(ctx, who, "get_superuser_realms", "GET /realm/superuser", "", Target{}, func(ctx context.Context, r *opRun) error {
		out = o.s.realms.Superusers()
		return nil
	})
	return out, err
}

// ResolverListRequest selects resolvers.
type ResolverListRequest struct {
	// Name selects one resolver ("" for all).
	Name string
	// Type selects a type ("" for all).
	Type string
	// Editable keeps only editable resolvers.
	Editable bool
}

// Resolvers lists resolver definitions, secrets censored (right
// resolverread, event get_resolvers).
func (o *Ops) Resolvers(ctx context.Context, who caller.Caller, req ResolverListRequest) ([]resolver.Def, error) {
	var out []resolver.Def
	err := o.readConfig(ctx, who, "get_resolvers", "GET /resolver/"+req.Name, rightResolverRead, Target{Resolver: req.Name}, func(ctx context.Context, r *opRun) error {
		list, err := o.s.resolvers.List(ctx, req.Type, req.Editable)
		if err != nil {
			return err
		}
		out = []resolver.Def{}
		for _, d := range list {
			if req.Name == "" || d.Name == req.Name {
				out = append(out, d)
			}
		}
		return nil
	})
	return out, err
}

// ResolverDefaults is the default configuration of the resolver type
// typ (event get_resolver_defaults); none of ours has template values,
// so it is empty for a known type and an error for an unknown one.
func (o *Ops) ResolverDefaults(ctx context.Context, who caller.Caller, typ string) (map[string]string, error) {
	var out map[string]string
	err := o.readConfig(ctx, who, "get_resolver_defaults", "GET /resolver/"+typ+"/default", "", Target{}, func(ctx context.Context, r *opRun) error {
		types := o.s.resolvers.Types()
		if !slices.Contains(types, typ) {
			return apierr.New(apierr.Parameter, fmt.Sprintf("resolver type : %s not in %v", typ, types))
		}
		out = map[string]string{}
		return nil
	})
	return out, err
}

// TestResolver tries a resolver configuration without saving it (right
// resolverwrite, event test_resolver). stored names a saved resolver
// whose secrets replace censored values. It returns the test's value and
// its description.
func (o *Ops) TestResolver(ctx context.Context, who caller.Caller, params map[string]string, stored string) (any, string, error) {
	var value any
	var desc string
	err := o.readConfig(ctx, who, "test_resolver", "POST /resolver/test", rightResolverWrite, Target{Resolver: stored}, func(ctx context.Context, r *opRun) error {
		var err error
		value, desc, err = o.s.resolvers.Test(ctx, params, stored)
		return err
	})
	return value, desc, err
}

// Policies lists the policies f selects (right policyread, event
// get_policies).
func (o *Ops) Policies(ctx context.Context, who caller.Caller, f policy.Filter) ([]policy.Policy, error) {
	var out []policy.Policy
	err := o.readConfig(ctx, who, "get_policies", "GET /policy/"+f.Name, rightPolicyRead, Target{Realm: f.Realm}, func(ctx context.Context, r *opRun) error {
		var err error
		out, err = o.s.policies.List(ctx, f)
		return err
	})
	return out, err
}

// PolicyDefs is the definition of the policy actions (right policyread,
// event get_policy_defs): scope "" maps every scope to its actions; a
// scope gives its actions ({} for an unknown scope); "conditions" the
// condition sections; "pinodes" the node names.
func (o *Ops) PolicyDefs(ctx context.Context, who caller.Caller, scope string) (any, error) {
	var out any
	err := o.readConfig(ctx, who, "get_policy_defs", "GET /policy/defs/"+scope, rightPolicyRead, Target{}, func(ctx context.Context, r *opRun) error {
		defs := o.s.policies.Defs()
		switch scope {
		case "":
			all := map[string]any{}
			for _, sc := range defs.Scopes() {
				if j := defs.JSON(sc); len(j) > 0 {
					all[sc] = j
				}
			}
			out = all
		case "conditions":
			out = policy.ConditionDefs()
		case "pinodes":
			nodes, err := o.s.Nodes(ctx)
			if err != nil {
				return err
			}
			names := []string{}
			for _, n := range nodes {
				names = append(names, n.Name)
			}
			out = names
		default:
			if !defs.ValidScope(scope) {
				out = map[string]any{}
			} else {
				out = defs.JSON(scope)
			}
		}
		return nil
	})
	return out, err
}

// ExportPolicies is every policy in policy.Export's file format (right
// policyread, event export_policies).
func (o *Ops) ExportPolicies(ctx context.Context, who caller.Caller) ([]byte, error) {
	var out []byte
	err := o.readConfig(ctx, who, "export_policies", "GET /policy/export/", rightPolicyRead, Target{}, func(ctx context.Context, r *opRun) error {
		list, err := o.s.policies.List(ctx, policy.Filter{})
		if err != nil {
			return err
		}
		out = policy.Export(list)
		return nil
	})
	return out, err
}

// PolicyCheck asks which policies match a request.
type PolicyCheck struct {
	// User, Realm, Scope and Action are required; Resolver is optional.
	User, Realm, Resolver, Scope, Action string
	// Client is the client address to match (unset: the caller's).
	Client netip.Addr
}

// CheckPolicies lists the active policies that match req (right
// policyread, event check_policy); none matching is an empty list.
func (o *Ops) CheckPolicies(ctx context.Context, who caller.Caller, req PolicyCheck) ([]policy.Policy, error) {
	var out []policy.Policy
	err := o.readConfig(ctx, who, "check_policy", "GET /policy/check", rightPolicyRead, Target{User: req.User, Realm: req.Realm, Resolver: req.Resolver}, func(ctx context.Context, r *opRun) error {
		for _, f := range []struct{ name, v string }{{"user", req.User}, {"realm", req.Realm}, {"scope", req.Scope}, {"action", req.Action}} {
			if f.v == "" {
				return apierr.MissingParameter(f.name)
			}
		}
		client := req.Client
		if !client.IsValid() {
			client = who.Client
		}
		t := Target{User: req.User, Realm: req.Realm, Resolver: req.Resolver}
		q := policy.Query{Scope: req.Scope, Action: req.Action, User: policy.Str(req.User), Realm: policy.Str(req.Realm),
			Client: client, UserAgent: who.UserAgent, Data: func() policy.ConditionData { return o.conditionData(ctx, who, t) }}
		if req.Resolver != "" {
			q.Resolver = policy.Str(req.Resolver)
		}
		var err error
		out, err = o.s.policies.Match(ctx, q)
		return err
	})
	return out, err
}

// SMTPServers lists the SMTP servers, passwords censored (right
// smtpserver_read, event get_smtpservers).
func (o *Ops) SMTPServers(ctx context.Context, who caller.Caller) ([]notify.SMTPServer, error) {
	var out []notify.SMTPServer
	err := o.readConfig(ctx, who, "get_smtpservers", "GET /smtpserver/", rightSMTPRead, Target{}, func(ctx context.Context, r *opRun) error {
		var err error
		out, err = o.s.notify.SMTPServers(ctx)
		return err
	})
	return out, err
}

// TestResult is the outcome of a configuration test that reached its
// peer: OK, or the short reason it failed.
type TestResult struct {
	OK      bool
	Message string
}

// SendTestEmail sends a test mail to recipient through the inline
// definition d (right smtpserver_write, event test_smtpserver). A failed
// delivery is a result, bad input an error.
func (o *Ops) SendTestEmail(ctx context.Context, who caller.Caller, d notify.SMTPServer, recipient string) (TestResult, error) {
	var res TestResult
	err := o.readConfig(ctx, who, "test_smtpserver", "POST /smtpserver/send_test_email", rightSMTPWrite, Target{}, func(ctx context.Context, r *opRun) error {
		if recipient == "" {
			return apierr.MissingParameter("recipient")
		}
		if d.Server == "" {
			return apierr.MissingParameter("server")
		}
		if err := o.s.notify.SendTestMail(ctx, d, recipient); err != nil {
			if ae, ok := errors.AsType[*apierr.Error](err); ok && errors.Is(err, notify.ErrSendFailed) {
				res = TestResult{Message: ae.Error()}
				r.Entry.Info = ae.Error()
				return nil
			}
			return err
		}
		res = TestResult{OK: true, Message: "The test email was sent."}
		return nil
	})
	return res, err
}

// SMSGateways lists the SMS gateways (all for id 0), secrets censored
// (right smsgateway_read, event get_smsgateways).
func (o *Ops) SMSGateways(ctx context.Context, who caller.Caller, id int) ([]notify.Gateway, error) {
	var out []notify.Gateway
	action := "GET /smsgateway/"
	if id > 0 {
		action += strconv.Itoa(id)
	}
	err := o.readConfig(ctx, who, "get_smsgateways", action, rightSMSRead, Target{}, func(ctx context.Context, r *opRun) error {
		if id < 0 {
			return apierr.New(apierr.Parameter, "The gateway id must be a positive integer.")
		}
		var err error
		out, err = o.s.notify.Gateways(ctx, id)
		return err
	})
	return out, err
}

// SMSProviders lists the SMS provider modules and their options (right
// smsgateway_read, event get_smsgateway_providers).
func (o *Ops) SMSProviders(ctx context.Context, who caller.Caller) (map[string]notify.ProviderInfo, error) {
	var out map[string]notify.ProviderInfo
	err := o.readConfig(ctx, who, "get_smsgateway_providers", "GET /smsgateway/providers", rightSMSRead, Target{}, func(ctx context.Context, r *opRun) error {
		out = notify.Providers()
		return nil
	})
	return out, err
}

// RadiusServers lists the RADIUS servers, secrets censored (right
// radiusserver_read, event get_radiusservers).
func (o *Ops) RadiusServers(ctx context.Context, who caller.Caller) ([]notify.RadiusServer, error) {
	var out []notify.RadiusServer
	err := o.readConfig(ctx, who, "get_radiusservers", "GET /radiusserver/", rightRadiusRead, Target{}, func(ctx context.Context, r *opRun) error {
		var err error
		out, err = o.s.notify.RadiusServers(ctx)
		return err
	})
	return out, err
}

// TestRadius sends a test Access-Request for user through the RADIUS
// server id (right radiusserver_write, event test_radiusserver); it
// reports whether the answer was an Access-Accept.
func (o *Ops) TestRadius(ctx context.Context, who caller.Caller, id, user, password string) (bool, error) {
	ok := false
	err := o.readConfig(ctx, who, "test_radiusserver", "POST /radiusserver/test_request", rightRadiusWrite, Target{}, func(ctx context.Context, r *opRun) error {
		for _, f := range []struct{ name, v string }{{"identifier", id}, {"username", user}, {"password", password}} {
			if f.v == "" {
				return apierr.MissingParameter(f.name)
			}
		}
		var err error
		ok, err = o.s.notify.TestRadius(ctx, id, user, password)
		return err
	})
	return ok, err
}

// RadiusServerNames lists the identifiers of the RADIUS server
// definitions, for whoever may enroll RADIUS tokens: privacyIDEA's GET
// /system/names/radius (right enrollRADIUS, administrators and users).
func (o *Ops) RadiusServerNames(ctx context.Context, who caller.Caller) ([]string, error) {
	out := []string{}
	err := o.run(ctx, who, opSpec{event: "list_radius_servers", action: "GET /system/names/radius", right: "enrollRADIUS"},
		func(ctx context.Context, r *opRun) error {
			list, err := o.s.notify.RadiusServers(ctx)
			if err != nil {
				return err
			}
			for _, rs := range list {
				out = append(out, rs.Identifier)
			}
			return nil
		})
	return out, err
}
