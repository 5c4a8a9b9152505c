package authsrv

// The rights and the token selection of the token operations: which
// tokens an operation is about, whether the caller may touch each of them,
// and how an operation runs over several tokens.

import (
	"context"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
	"github.com/authsrv/authsrv/validate"
)

// callerScope is the policy scope of who's rights.
func callerScope(who caller.Caller) string {
	if who.Role == caller.User {
		return policy.ScopeUser
	}
	return policy.ScopeAdmin
}

// tokenQuery is who's policy query for action in scope about a token
// owner (or, without one, a realm).
func (o *Ops) tokenQuery(ctx context.Context, who caller.Caller, scope, action string, owner *user.User, realm *string) policy.Query {
	t := Target{}
	if owner != nil {
		t = Target{User: owner.Login, Realm: owner.Realm, Resolver: owner.Resolver}
	} else if realm != nil {
		t.Realm = *realm
	}
	q := policy.Query{Scope: scope, Action: action, Client: who.Client, UserAgent: who.UserAgent}
	q.Data = func() policy.ConditionData { return o.conditionData(ctx, who, t) }
	if who.Role == caller.User {
		q.User, q.Realm = policy.Str(who.Name), policy.Str(who.Realm)
		if owner != nil {
			q.Resolver = policy.Str(owner.Resolver)
		}
	} else if scope == policy.ScopeAdmin && !who.Trusted() {
		q.AdminUser, q.AdminRealm = policy.Str(who.Name), policy.Str(who.Realm)
	}
	if who.Role != caller.User || scope != policy.ScopeUser {
		if owner != nil && owner.UID != "" {
			q.User, q.Realm, q.Resolver = policy.Str(owner.Login), policy.Str(owner.Realm), policy.Str(owner.Resolver)
		} else if realm != nil {
			q.Realm = realm
		}
	}
	return q
}

// allowedOn reports whether who may do action on a token (nil: a token not
// yet known, with an optional owner or realm as the target). An
// administrator's right on an unassigned token holds when it holds for one
// of the token's realms.
func (o *Ops) allowedOn(ctx context.Context, who caller.Caller, r *opRun, action string, t *token.Token, owner *user.User, realm *string) (bool, error) {
	if who.Trusted() {
		return true, nil
	}
	if who.Role != caller.Admin && who.Role != caller.User {
		return false, nil
	}
	if t != nil {
		owner = t.Owner
	}
	scope := callerScope(who)
	try := func(q policy.Query) (bool, error) {
		ok, names, err := o.s.policies.Allowed(ctx, q)
		if ok {
			r.note(names...)
		}
		return ok, err
	}
	if who.Role == caller.Admin && t != nil && !t.Assigned() && len(t.Realms) > 0 {
		for _, rl := range t.Realms {
			if ok, err := try(o.tokenQuery(ctx, who, scope, action, nil, policy.Str(rl))); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	}
	return try(o.tokenQuery(ctx, who, scope, action, owner, realm))
}

// mustAllow is allowedOn with the refusal as an error.
func (o *Ops) mustAllow(ctx context.Context, who caller.Caller, r *opRun, action string, t *token.Token) error {
	ok, err := o.allowedOn(ctx, who, r, action, t, nil, nil)
	if err != nil {
		return err
	}
	if !ok {
		return Denied(who, action)
	}
	return nil
}

// reader reads the policies about a token owner (or realm) for who.
func (o *Ops) reader(ctx context.Context, who caller.Caller, owner *user.User, realm *string) token.QueryReader {
	return token.QueryReader{Policies: o.s.policies, Query: o.tokenQuery(ctx, who, "", "", owner, realm)}
}

// policyString is the value a matching policy gives action in scope about
// a token owner ("" when none).
func (o *Ops) policyString(ctx context.Context, who caller.Caller, r *opRun, scope, action string, owner *user.User) (string, error) {
	v, names, err := o.reader(ctx, who, owner, nil).Value(ctx, scope, action)
	if v != "" {
		r.note(names...)
	}
	return v, err
}

// checkPIN applies otp_pin_minlength/maxlength/contents (and their
// <type>_ variants) of who's scope to a new PIN.
func (o *Ops) checkPIN(ctx context.Context, who caller.Caller, r *opRun, typ, pin string, owner *user.User) error {
	if who.Trusted() {
		return nil
	}
	scope := callerScope(who)
	return policy.CheckPINRules(typ, pin, func(action string) (string, error) {
		return o.policyString(ctx, who, r, scope, action, owner)
	})
}

// pinChangeDue is the tokeninfo next_pin_change that a PIN set by who
// gets, as privacyIDEA's save_pin_change: an administrator under ENROLL
// change_pin_on_first_use makes the change due at once; a user who sets
// a PIN under ENROLL change_pin_every makes it due after that time. ""
// when none is due.
func (o *Ops) pinChangeDue(ctx context.Context, who caller.Caller, r *opRun, owner *user.User, pinGiven bool) (string, error) {
	now := o.s.cfg.now()
	pr := o.reader(ctx, who, owner, nil)
	switch who.Role {
	case caller.Admin:
		on, names, err := pr.Flag(ctx, policy.ScopeEnrollment, "change_pin_on_first_use")
		if err != nil || !on {
			return "", err
		}
		r.note(names...)
		return token.FormatValidity(now), nil
	case caller.User:
		if !pinGiven {
			return "", nil
		}
		v, names, err := pr.Value(ctx, policy.ScopeEnrollment, "change_pin_every")
		if err != nil || v == "" {
			return "", err
		}
		r.note(names...)
		d, ok := token.ParsePINChangeEvery(v)
		if !ok {
			return "", apierr.New(apierr.Policy, "The value "+v+" of the policy action change_pin_every is not valid.")
		}
		return token.FormatValidity(now.Add(d)), nil
	}
	return "", nil
}

// self is a user-role caller as a resolved user.
func (o *Ops) self(ctx context.Context, who caller.Caller) (*user.User, error) {
	u, _, err := o.ResolveTarget(ctx, who, Target{})
	if err != nil {
		return nil, err
	}
	return &u, nil
}

func sameOwner(a, b *user.User) bool {
	return a != nil && b != nil && strings.EqualFold(a.Realm, b.Realm) && a.Resolver == b.Resolver && a.UID == b.UID
}

// targetTokens finds the tokens of sel: its serials, else (with
// allowOwner) all tokens of its owner (the caller itself for the user
// role). multi reports a list request. Users only ever see their own
// tokens: others count as not found.
func (o *Ops) targetTokens(ctx context.Context, who caller.Caller, sel TokenSelect, allowOwner bool) (toks []*token.Token, multi bool, err error) {
	var serials []string
	for _, s := range sel.Serials {
		if s = strings.TrimSpace(s); s != "" {
			serials = append(serials, s)
		}
	}
	multi = sel.List || len(serials) > 1
	var self *user.User
	if who.Role == caller.User {
		if self, err = o.self(ctx, who); err != nil {
			return nil, false, err
		}
	}
	if len(serials) > 0 {
		var missing []string
		for _, s := range serials {
			t, err := o.s.tokens.Get(ctx, s)
			if apierr.Is(err, apierr.ResourceNotFound) || (err == nil && self != nil && !sameOwner(t.Owner, self)) {
				missing = append(missing, s)
				continue
			}
			if err != nil {
				return nil, false, err
			}
			toks = append(toks, t)
		}
		if len(missing) > 0 && (!multi || len(toks) == 0) {
			return nil, false, token.NotFound(missing...)
		}
		return toks, multi, nil
	}
	if !allowOwner {
		return nil, false, apierr.MissingParameter("serial")
	}
	if self == nil {
		if sel.Owner.User == "" {
			return nil, false, validate.ErrNoTarget
		}
		u, _, err := o.ResolveTarget(ctx, who, sel.Owner)
		if err != nil {
			return nil, false, err
		}
		self = &u
	}
	toks, err = o.s.tokens.ByOwner(ctx, *self)
	return toks, true, err
}

// tokenOp describes one operation on selected tokens for eachToken.
type tokenOp struct {
	event, path, right string
	// allowOwner: without serials, all tokens of the owner.
	allowOwner bool
	// adminOnly refuses users.
	adminOnly bool
	// pre checks the request before any token is read.
	pre func() error
}

// eachToken runs one operation over the selected tokens: the right is
// checked per token, then fn does the work of one token and hands audit
// to its write when it is the last write of the operation. One token: a
// refusal or error fails the operation. Several: refused and failing
// serials are reported.
func (o *Ops) eachToken(ctx context.Context, who caller.Caller, op tokenOp, sel TokenSelect,
	fn func(ctx context.Context, r *opRun, t *token.Token, audit []func(store.Tx) error) (int, error)) (TokenBatch, error) {
	return o.runTokens(ctx, who, op, sel, func(ctx context.Context, r *opRun, allowed []*token.Token, multi bool, res *TokenBatch) error {
		if len(allowed) > 1 {
			// Each token is its own transaction and the entry goes with
			// the last: once the first commits, a client that leaves
			// does not stop the rest (nor its entry).
			ctx = context.WithoutCancel(ctx)
		}
		for i, t := range allowed {
			var hooks []func(store.Tx) error
			if i == len(allowed)-1 {
				hooks = []func(store.Tx) error{r.Audit}
			}
			n, err := fn(ctx, r, t, hooks)
			if err != nil {
				if !multi {
					return err
				}
				res.Failed = append(res.Failed, t.Serial)
				continue
			}
			res.Success++
			res.Count += n
		}
		return nil
	})
}

// runTokens runs an operation over the tokens sel selects: body gets the
// tokens on which who has op's right (see allowedTokens) and fills res.
func (o *Ops) runTokens(ctx context.Context, who caller.Caller, op tokenOp, sel TokenSelect,
	body func(ctx context.Context, r *opRun, allowed []*token.Token, multi bool, res *TokenBatch) error) (TokenBatch, error) {
	var res TokenBatch
	target := Target{}
	if len(sel.Serials) == 0 {
		target = sel.Owner
	}
	err := o.run(ctx, who, opSpec{event: op.event, action: "POST /token/" + op.path, target: target}, func(ctx context.Context, r *opRun) error {
		allowed, multi, err := o.allowedTokens(ctx, who, r, op, sel, &res)
		if err != nil {
			return err
		}
		if err := body(ctx, r, allowed, multi, &res); err != nil {
			return err
		}
		r.reply = batchReply(res)
		return nil
	})
	return res, err
}

// batchReply is the JSON answer of a token batch: its count, or for a
// list request count_success, failed and unauthorized.
func batchReply(res TokenBatch) *eventing.Response {
	if !res.List {
		return &eventing.Response{Status: true, Value: res.Count}
	}
	failed, unauth := res.Failed, res.Unauthorized
	if failed == nil {
		failed = []string{}
	}
	if unauth == nil {
		unauth = []string{}
	}
	return &eventing.Response{Status: true, Value: map[string]any{"count_success": res.Success, "failed": failed, "unauthorized": unauth}}
}

// allowedTokens finds the tokens sel selects and keeps those on which who
// has op's right: for a single token a refusal is the operation's error;
// of several, the refused serials go to res.Unauthorized. multi reports a
// list request.
func (o *Ops) allowedTokens(ctx context.Context, who caller.Caller, r *opRun, op tokenOp, sel TokenSelect, res *TokenBatch) ([]*token.Token, bool, error) {
	r.Entry.Serial = audit.Text(strings.Join(sel.Serials, ","), 256)
	if op.adminOnly && !who.IsAdmin() {
		return nil, false, errAdminOnly
	}
	if op.pre != nil {
		if err := op.pre(); err != nil {
			return nil, false, err
		}
	}
	toks, multi, err := o.targetTokens(ctx, who, sel, op.allowOwner)
	if err != nil {
		return nil, false, err
	}
	noteTokens(r, toks)
	res.List = multi
	var allowed []*token.Token
	for _, t := range toks {
		ok, err := o.allowedOn(ctx, who, r, op.right, t, nil, nil)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			if !multi {
				return nil, false, Denied(who, op.right)
			}
			res.Unauthorized = append(res.Unauthorized, t.Serial)
			continue
		}
		allowed = append(allowed, t)
	}
	return allowed, multi, nil
}

// noteTokens names the tokens of an operation in its audit entry.
func noteTokens(r *opRun, toks []*token.Token) {
	switch len(toks) {
	case 0:
	case 1:
		r.Entry.Serial, r.Entry.TokenType = toks[0].Serial, toks[0].Type
	default:
		serials := make([]string, len(toks))
		for i, t := range toks {
			serials[i] = t.Serial
		}
		r.Entry.Serial = audit.Text(strings.Join(serials, ","), 256)
	}
}

// changeTokens is an operation that makes one token.Change on every
// selected token, all in one transaction with the audit entry; count
// turns a token's outcome into its share of the answer.
func (o *Ops) changeTokens(ctx context.Context, who caller.Caller, op tokenOp, sel TokenSelect, ch token.Change, count func(changed bool) int) (TokenBatch, error) {
	return o.runTokens(ctx, who, op, sel, func(ctx context.Context, r *opRun, allowed []*token.Token, multi bool, res *TokenBatch) error {
		serials := make([]string, len(allowed))
		for i, t := range allowed {
			serials[i] = t.Serial
		}
		if !multi {
			if len(serials) == 0 {
				return nil
			}
			changed, err := o.s.tokens.ApplyOne(ctx, serials[0], ch, r.Audit)
			if err != nil {
				return err
			}
			res.Success, res.Count = 1, count(changed)
			return nil
		}
		outs, err := o.s.tokens.Apply(ctx, serials, ch, r.Audit)
		if err != nil {
			return err
		}
		for _, out := range outs {
			if out.Err != nil {
				res.Failed = append(res.Failed, out.Serial)
				continue
			}
			res.Success++
			res.Count += count(out.Changed)
		}
		return nil
	})
}

func ifChanged(changed bool) int {
	if changed {
		return 1
	}
	return 0
}

func one(bool) int { return 1 }
