package authsrv

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// errAdminOnly refuses an administrators' token operation to a user, as
// the HTTP API refuses the route.
var errAdminOnly = apierr.New(apierr.AuthMissingRight, "Authentication failure. You do not have the necessary role (['admin']) to access this resource!")

// TokenSelect names the tokens a token operation is about.
type TokenSelect struct {
	// Serials are the tokens asked for.
	Serials []string
	// List marks a request for a list (privacyIDEA's "serials", or several
	// serials): the answer is per token (TokenBatch) and a token that is
	// refused or fails does not fail the others.
	List bool
	// Owner, when no serial is given, selects all tokens of this user
	// (administrators; users always act on their own tokens). Operations
	// on one token only ignore it.
	Owner Target
}

// TokenBatch is the answer of an operation on one or several tokens.
type TokenBatch struct {
	// Count is the value privacyIDEA answers for one token (or the sum
	// over the tokens): the tokens changed, or the fields set.
	Count int
	// List is set for a list request, whose answer is the three fields
	// below (count_success, failed, unauthorized).
	List         bool
	Success      int
	Failed       []string
	Unauthorized []string
}

// EnableTokens enables the selected tokens (right "enable"); Count is the
// number of tokens whose state changed.
func (o *Ops) EnableTokens(ctx context.Context, who caller.Caller, sel TokenSelect) (TokenBatch, error) {
	return o.changeTokens(ctx, who, tokenOp{event: "token_enable", path: "enable", right: "enable", allowOwner: true}, sel, token.ActiveChange(true), ifChanged)
}

// DisableTokens disables the selected tokens (right "disable").
func (o *Ops) DisableTokens(ctx context.Context, who caller.Caller, sel TokenSelect) (TokenBatch, error) {
	return o.changeTokens(ctx, who, tokenOp{event: "token_disable", path: "disable", right: "disable", allowOwner: true}, sel, token.ActiveChange(false), ifChanged)
}

// ResetTokens sets the fail counters of the selected tokens to 0 (right
// "reset").
func (o *Ops) ResetTokens(ctx context.Context, who caller.Caller, sel TokenSelect) (TokenBatch, error) {
	return o.changeTokens(ctx, who, tokenOp{event: "token_reset", path: "reset", right: "reset", allowOwner: true}, sel, token.ResetChange(), one)
}

// RevokeTokens revokes the selected tokens for good (right "revoke").
func (o *Ops) RevokeTokens(ctx context.Context, who caller.Caller, sel TokenSelect) (TokenBatch, error) {
	return o.changeTokens(ctx, who, tokenOp{event: "token_revoke", path: "revoke", right: "revoke", allowOwner: true}, sel, token.RevokeChange(), one)
}

// UnassignTokens takes the selected tokens from their owners (right
// "unassign").
func (o *Ops) UnassignTokens(ctx context.Context, who caller.Caller, sel TokenSelect) (TokenBatch, error) {
	return o.changeTokens(ctx, who, tokenOp{event: "token_unassign", path: "unassign", right: "unassign", allowOwner: true}, sel, token.UnassignChange(), one)
}

// DeleteTokens deletes the selected tokens (right "delete").
func (o *Ops) DeleteTokens(ctx context.Context, who caller.Caller, sel TokenSelect) (TokenBatch, error) {
	return o.changeTokens(ctx, who, tokenOp{event: "token_delete", path: "delete", right: "delete", allowOwner: true}, sel, token.DeleteChange(), one)
}

// SetTokenFields applies /token/set fields to the selected tokens
// (administrators, right "set"); Count is the number of fields set, per
// token.
func (o *Ops) SetTokenFields(ctx context.Context, who caller.Caller, sel TokenSelect, f token.Fields) (TokenBatch, error) {
	n := f.Len()
	return o.changeTokens(ctx, who, tokenOp{event: "token_set", path: "set", right: "set", allowOwner: true, adminOnly: true}, sel,
		token.FieldsChange(f), func(bool) int { return n })
}

// SetTokenDescription sets the description of the selected token (right
// "setdescription").
func (o *Ops) SetTokenDescription(ctx context.Context, who caller.Caller, sel TokenSelect, desc string) error {
	_, err := o.changeTokens(ctx, who, tokenOp{event: "token_set", path: "description", right: "setdescription"}, sel, token.DescriptionChange(desc), one)
	return err
}

// SetTokenRealms replaces the realms of the selected token
// (administrators, right "tokenrealms"); every realm must exist.
func (o *Ops) SetTokenRealms(ctx context.Context, who caller.Caller, sel TokenSelect, realms []string) error {
	pre := func() error {
		for _, r := range realms {
			if !o.s.realms.Exists(ctx, r) {
				return errNoRealm(r)
			}
		}
		return nil
	}
	_, err := o.changeTokens(ctx, who, tokenOp{event: "token_realm", path: "realm", right: "tokenrealms", adminOnly: true, pre: pre}, sel, token.RealmsChange(realms), one)
	return err
}

func errNoRealm(r string) error {
	return apierr.New(apierr.Parameter, "The realm "+r+" does not exist.")
}

// SetTokenInfo sets one tokeninfo value of the selected token
// (administrators, right "settokeninfo").
func (o *Ops) SetTokenInfo(ctx context.Context, who caller.Caller, sel TokenSelect, key, value string) error {
	_, err := o.changeTokens(ctx, who, tokenOp{event: "token_info", path: "info", right: "settokeninfo", adminOnly: true}, sel, token.InfoChange(key, value), one)
	return err
}

// DeleteTokenInfo removes one tokeninfo value of the selected token
// (administrators, right "settokeninfo").
func (o *Ops) DeleteTokenInfo(ctx context.Context, who caller.Caller, sel TokenSelect, key string) error {
	_, err := o.changeTokens(ctx, who, tokenOp{event: "token_info", path: "info", right: "settokeninfo", adminOnly: true}, sel, token.InfoDeleteChange(key), one)
	return err
}

// ResyncToken resynchronises the selected token's counter with two
// consecutive OTP values (right "resync"); it reports whether they
// matched.
func (o *Ops) ResyncToken(ctx context.Context, who caller.Caller, sel TokenSelect, otp1, otp2 string) (bool, error) {
	ok := false
	_, err := o.eachToken(ctx, who, tokenOp{event: "token_resync", path: "resync", right: "resync"}, sel,
		func(ctx context.Context, r *opRun, t *token.Token, hooks []func(store.Tx) error) (int, error) {
			m, err := o.s.tokens.Resync(ctx, t.Serial, otp1, otp2, hooks...)
			ok = ok || m
			return 1, err
		})
	return ok, err
}

// TokenPINs are the PINs /token/setpin sets; nil leaves one alone.
type TokenPINs struct {
	// OTPPIN is the token PIN.
	OTPPIN *string
	// UserPIN and SOPIN belong to smartcard tokens: none of our types has
	// them, so they count without effect.
	UserPIN, SOPIN *string
	// Encrypt stores the PIN encrypted instead of hashed.
	Encrypt bool
}

// SetTokenPIN sets the PINs of the selected token (right "setpin"),
// checked against the PIN policies; it returns the number of PINs set.
func (o *Ops) SetTokenPIN(ctx context.Context, who caller.Caller, sel TokenSelect, pins TokenPINs) (int, error) {
	res, err := o.eachToken(ctx, who, tokenOp{event: "token_setpin", path: "setpin", right: "setpin"}, sel,
		func(ctx context.Context, r *opRun, t *token.Token, hooks []func(store.Tx) error) (int, error) {
			set := 0
			if pins.UserPIN != nil {
				set++
			}
			if pins.SOPIN != nil {
				set++
			}
			if pins.OTPPIN == nil {
				// Nothing to write: run writes the entry after.
				return set, nil
			}
			pin := *pins.OTPPIN
			if err := o.checkPIN(ctx, who, r, t.Type, pin, t.Owner); err != nil {
				return 0, err
			}
			due, err := o.pinChangeDue(ctx, who, r, t.Owner, pin != "")
			if err != nil {
				return 0, err
			}
			if due != "" {
				hooks = append([]func(store.Tx) error{o.s.tokens.EditHook(t.Serial, token.InfoChange(token.InfoNextPinChange, due))}, hooks...)
			}
			if err := o.s.tokens.SetPIN(ctx, t.Serial, pin, pins.Encrypt, hooks...); err != nil {
				return 0, err
			}
			return set + 1, nil
		})
	return res.Count, err
}

// SetRandomTokenPIN gives the selected token a random PIN of the length
// otp_pin_set_random asks for (default 12; right "setrandompin"). It
// returns the number of tokens and the PIN, which the caller hands to the
// user once.
func (o *Ops) SetRandomTokenPIN(ctx context.Context, who caller.Caller, sel TokenSelect) (int, string, error) {
	var pin string
	res, err := o.eachToken(ctx, who, tokenOp{event: "token_setrandompin", path: "setrandompin", right: "setrandompin"}, sel,
		func(ctx context.Context, r *opRun, t *token.Token, hooks []func(store.Tx) error) (int, error) {
			length := 12
			v, err := o.policyString(ctx, who, r, callerScope(who), "otp_pin_set_random", t.Owner)
			if err != nil {
				return 0, err
			}
			if x, err := strconv.Atoi(v); err == nil && x > 0 && x <= 128 {
				length = x
			}
			if pin, err = o.s.tokens.RandomString(length, "cn"); err != nil {
				return 0, err
			}
			return 1, o.s.tokens.SetPIN(ctx, t.Serial, pin, false, hooks...)
		})
	return res.Count, pin, err
}

// LostToken replaces the selected lost token by a temporary password
// token "lost<serial>" for its owner (right "losttoken"; ENROLL
// losttoken_PW_length, losttoken_PW_contents, losttoken_valid).
func (o *Ops) LostToken(ctx context.Context, who caller.Caller, sel TokenSelect) (token.LostResult, error) {
	var res token.LostResult
	_, err := o.eachToken(ctx, who, tokenOp{event: "token_lost", path: "lost", right: "losttoken"}, sel,
		func(ctx context.Context, r *opRun, t *token.Token, hooks []func(store.Tx) error) (int, error) {
			var lo token.LostOptions
			val := func(action string) (string, error) {
				return o.policyString(ctx, who, r, policy.ScopeEnrollment, action, t.Owner)
			}
			if v, err := val("losttoken_PW_length"); err != nil {
				return 0, err
			} else if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 128 {
				lo.PWLength = n
			}
			v, err := val("losttoken_PW_contents")
			if err != nil {
				return 0, err
			}
			lo.PWContents = v
			if v, err := val("losttoken_valid"); err != nil {
				return 0, err
			} else if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 3650 {
				lo.Valid = time.Duration(n) * 24 * time.Hour
			}
			res, err = o.s.tokens.Lost(ctx, t.Serial, lo, hooks...)
			return 1, err
		})
	return res, err
}

// TokenAssign is a token for a user.
type TokenAssign struct {
	Serial string
	// User is the new owner (administrators; a user assigns to itself).
	User Target
	// PIN, when not nil, becomes the token PIN.
	PIN        *string
	EncryptPIN bool
}

// AssignToken gives a token to a user (right "assign", checked against
// the new owner).
func (o *Ops) AssignToken(ctx context.Context, who caller.Caller, req TokenAssign) error {
	target := req.User
	return o.run(ctx, who, opSpec{event: "token_assign", action: "POST /token/assign", target: target}, func(ctx context.Context, r *opRun) error {
		if req.Serial == "" {
			return apierr.MissingParameter("serial")
		}
		var owner *user.User
		var err error
		if who.Role == caller.User {
			owner, err = o.self(ctx, who)
		} else {
			if req.User.User == "" {
				return apierr.MissingParameter("user")
			}
			var u user.User
			u, _, err = o.ResolveTarget(ctx, who, req.User)
			owner = &u
		}
		if err != nil {
			return err
		}
		r.Entry.User, r.Entry.Realm, r.Entry.Resolver = owner.Login, owner.Realm, owner.Resolver
		t, err := o.s.tokens.Get(ctx, req.Serial)
		if err != nil {
			return err
		}
		r.Entry.Serial, r.Entry.TokenType = t.Serial, t.Type
		ok, err := o.allowedOn(ctx, who, r, "assign", nil, owner, nil)
		if err != nil {
			return err
		}
		if !ok {
			return Denied(who, "assign")
		}
		if t.Assigned() {
			return token.ErrAssigned(t.Owner, who.Role == caller.User)
		}
		if req.PIN != nil {
			if err := o.checkPIN(ctx, who, r, t.Type, *req.PIN, owner); err != nil {
				return err
			}
		}
		return o.s.tokens.Assign(ctx, req.Serial, *owner, req.PIN, req.EncryptPIN, who.Role == caller.User, r.Audit)
	})
}

// TokenCopy names the source and the target token of copypin and
// copyuser.
type TokenCopy struct{ From, To string }

// CopyTokenPIN copies the PIN of one token to another (administrators,
// right "copytokenpin" on both).
func (o *Ops) CopyTokenPIN(ctx context.Context, who caller.Caller, req TokenCopy) error {
	return o.copyToken(ctx, who, "token_copypin", "copypin", "copytokenpin", req, o.s.tokens.CopyPIN)
}

// CopyTokenUser copies the owner of one token to another (administrators,
// right "copytokenuser" on both).
func (o *Ops) CopyTokenUser(ctx context.Context, who caller.Caller, req TokenCopy) error {
	return o.copyToken(ctx, who, "token_copyuser", "copyuser", "copytokenuser", req, o.s.tokens.CopyUser)
}

func (o *Ops) copyToken(ctx context.Context, who caller.Caller, event, path, right string, req TokenCopy,
	fn func(ctx context.Context, from, to string, also ...func(store.Tx) error) error) error {
	return o.run(ctx, who, opSpec{event: event, action: "POST /token/" + path}, func(ctx context.Context, r *opRun) error {
		if !who.IsAdmin() {
			return errAdminOnly
		}
		if req.From == "" {
			return apierr.MissingParameter("from")
		}
		if req.To == "" {
			return apierr.MissingParameter("to")
		}
		r.Entry.Serial = audit.Text(req.From+","+req.To, 256)
		for _, s := range []string{req.From, req.To} {
			t, err := o.s.tokens.Get(ctx, s)
			if err != nil {
				return err
			}
			if err := o.mustAllow(ctx, who, r, right, t); err != nil {
				return err
			}
		}
		return fn(ctx, req.From, req.To, r.Audit)
	})
}

// CancelChallenges deletes the open challenges of a transaction
// (administrators, right "cancelchallenge"); it returns how many.
func (o *Ops) CancelChallenges(ctx context.Context, who caller.Caller, transactionID string) (int, error) {
	n := 0
	err := o.run(ctx, who, opSpec{event: "token_cancelchallenge", action: "DELETE /token/challenges/transaction/" + transactionID, right: "cancelchallenge"},
		func(ctx context.Context, r *opRun) error {
			if !who.IsAdmin() {
				return errAdminOnly
			}
			var err error
			n, err = o.s.tokens.CancelChallenges(ctx, transactionID, r.Audit)
			return err
		})
	return n, err
}

// TokenInit is a token enrollment.
type TokenInit struct {
	// Type is the token type (default hotp); Serial "" generates one.
	Type, Serial string
	// Params are the enrollment parameters (otpkey, genkey, pin,
	// description, type specific ones, ...).
	Params token.Params
	// User is the owner (administrators; a user enrolls for itself).
	User Target
	// Realm is the realm of an administrator's token without owner.
	Realm string
	// TokenRealms are further token realms.
	TokenRealms []string
}

// TokenInitResult is an enrolled token.
type TokenInitResult struct {
	Serial, Type string
	// Detail is the enrollment's detail as the token type answers it
	// (serial, rollout_state, googleurl, otpkey, ...); the caller shows
	// it to whoever enrolls, once.
	Detail map[string]any
}

// InitToken enrolls (or re-initialises) a token: right "enroll<TYPE>"
// (and "enrollpin" for a PIN), the PIN policies, the enrollment defaults
// and limits (token.EnrollPolicies), and the PIN change due date, with
// the token and its audit entry in one transaction.
func (o *Ops) InitToken(ctx context.Context, who caller.Caller, req TokenInit) (TokenInitResult, error) {
	var res TokenInitResult
	p := token.Params{}
	for k, v := range req.Params {
		p[k] = v
	}
	typ := strings.ToLower(strings.TrimSpace(req.Type))
	if typ == "" {
		typ = "hotp"
	}
	target := req.User
	if target.User == "" && req.Realm != "" {
		target = Target{Realm: req.Realm}
	}
	err := o.run(ctx, who, opSpec{event: "token_init", action: "POST /token/init", target: target}, func(ctx context.Context, r *opRun) error {
		r.Entry.TokenType, r.Entry.Serial = audit.Text(typ, 30), audit.Text(req.Serial, 256)
		if _, ok := o.s.tokens.Types().Get(typ); !ok {
			return apierr.New(apierr.TokenAdmin, "init token failed. Unknown token type: "+req.Type).WithNumber(1610)
		}
		var owner *user.User
		if who.Role == caller.User {
			u, err := o.self(ctx, who)
			if err != nil {
				return err
			}
			owner = u
		} else if req.User.User != "" {
			u, _, err := o.ResolveTarget(ctx, who, req.User)
			if err != nil {
				return err
			}
			owner = &u
		}
		if owner != nil {
			r.Entry.User, r.Entry.Realm, r.Entry.Resolver = owner.Login, owner.Realm, owner.Resolver
		}
		var realms []string
		var realmTarget *string
		if who.IsAdmin() && owner == nil && req.Realm != "" {
			if !o.s.realms.Exists(ctx, req.Realm) {
				return errNoRealm(req.Realm)
			}
			realms, realmTarget = append(realms, req.Realm), policy.Str(req.Realm)
		}
		for _, rl := range req.TokenRealms {
			if rl = strings.TrimSpace(rl); rl != "" {
				if !o.s.realms.Exists(ctx, rl) {
					return errNoRealm(rl)
				}
				realms = append(realms, rl)
			}
		}
		action := "enroll" + strings.ToUpper(typ)
		ok, err := o.allowedOn(ctx, who, r, action, nil, owner, realmTarget)
		if err != nil {
			return err
		}
		if !ok {
			return Denied(who, action)
		}
		serial := req.Serial
		var existing *token.Token
		if serial != "" {
			if t, err := o.s.tokens.Get(ctx, serial); err == nil {
				existing = t
				if who.Role == caller.User && !sameOwner(t.Owner, owner) {
					return apierr.New(apierr.TokenAdmin, "Token already assigned to another user.").WithNumber(1103)
				}
				if who.Role == caller.Admin {
					if err := o.mustAllow(ctx, who, r, action, t); err != nil {
						return err
					}
				}
			}
		}
		if pin, ok := p.Get("pin"); ok && pin != "" {
			ok, err := o.allowedOn(ctx, who, r, "enrollpin", existing, owner, realmTarget)
			if err != nil {
				return err
			}
			if !ok {
				return apierr.New(apierr.Policy, "Setting a PIN is not allowed due to missing 'enrollpin' right.")
			}
			if err := o.checkPIN(ctx, who, r, typ, pin, owner); err != nil {
				return err
			}
		}
		enroll, err := token.EnrollPolicies(ctx, o.reader(ctx, who, owner, realmTarget), callerScope(who), typ, p)
		r.note(enroll.Policies...)
		if err != nil {
			return err
		}
		ir := token.InitRequest{Type: typ, Serial: serial, Params: p, Owner: owner, OwnerInfo: o.ownerInfo(ctx, owner), Realms: realms}
		enroll.Apply(&ir)
		ir.Verify = enroll.Verify && existing == nil
		if existing != nil {
			ir.Limits = token.Limits{}
		} else if realmTarget != nil {
			ir.Limits.Realm = *realmTarget
		}
		pinOwner := owner
		if pinOwner == nil && existing != nil {
			pinOwner = existing.Owner
		}
		due, err := o.pinChangeDue(ctx, who, r, pinOwner, p.Str("pin") != "")
		if err != nil {
			return err
		}
		if due != "" {
			ir.Info = map[string]string{token.InfoNextPinChange: due}
		}
		// A generated serial is chosen here for the audit entry; one that
		// a concurrent enrollment takes first is chosen anew.
		generated := ir.Serial == ""
		var t *token.Token
		var detail map[string]any
		for attempt := 1; ; attempt++ {
			if generated {
				if ir.Serial, err = o.s.tokens.NewSerial(ctx, typ); err != nil {
					return err
				}
			}
			r.Entry.Serial = ir.Serial
			t, detail, err = o.s.tokens.Init(ctx, ir, r.Audit)
			if generated && attempt < 4 && errors.Is(err, token.ErrSerialTaken) {
				continue
			}
			break
		}
		if err != nil {
			return err
		}
		res = TokenInitResult{Serial: t.Serial, Type: t.Type, Detail: detail}
		r.Entry.TokenType = audit.Text(t.Type, 30)
		r.respond(true, maps.Clone(detail))
		return nil
	})
	return res, err
}

// ownerInfo reads the user store attributes of a user as strings.
func (o *Ops) ownerInfo(ctx context.Context, u *user.User) map[string]string {
	out := map[string]string{}
	if u == nil || u.Resolver == "" {
		return out
	}
	in, err := o.s.resolvers.Instance(ctx, u.Resolver)
	if err != nil {
		return out
	}
	info, err := in.User(ctx, u.UID)
	if err != nil {
		return out
	}
	return info.Strings()
}
