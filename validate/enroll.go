package validate

import (
	"context"
	"errors"
	"strings"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
)

// Enrollment via multichallenge (AUTH enroll_via_multichallenge): after a
// successful authentication of a user who has no token of the policy's
// type, a token of that type is enrolled for the user in rollout state
// clientwait, and the answer is a challenge instead of a success. The
// user proves the new token with one OTP (transaction_id + pass), which
// makes the token enrolled and the authentication a success. With
// enroll_via_multichallenge_optional the user may cancel instead
// (cancel_enrollment=1 + transaction_id): the token is removed and the
// authentication succeeds.
//
// hotp, totp and daypassword show a QR code of the otpauth URL, as
// /token/init returns it to the enrolling user (the user's own seed; it
// is neither logged nor audited). email and sms send the OTP to the
// address or mobile number of the user store (the token reads it there at
// each challenge); a user without one gets no such token. The mail goes
// through the SMTP server definition when there is exactly one, the SMS
// through the first gateway of the user's sms_gateways policy; when the
// challenge can not be sent the token is removed again and the success
// stands (logged as a warning).
const (
	// sessionEnroll and sessionEnrollOptional are the challenge sessions
	// of an enrollment; only the optional one may be cancelled.
	sessionEnroll         = "enroll_via_multichallenge"
	sessionEnrollOptional = "enroll_via_multichallenge_optional"
	// infoEnrollVia marks a token enrolled this way. While such a token
	// waits for its first OTP it does not count as a token of the user for
	// passthru and passOnNoToken, and the next login enrolls it anew: an
	// unfinished enrollment does not lock the user out.
	infoEnrollVia = "enroll_via_multichallenge"

	// MsgEnrollScan is the default challenge text of a QR enrollment.
	MsgEnrollScan = "Please scan the QR code and enter the OTP value of the new token!"
	// MsgEnrollCancelled and MsgEnrollCancelFailed answer cancel_enrollment.
	MsgEnrollCancelled    = "Cancelled enrollment via multichallenge"
	MsgEnrollCancelFailed = "Failed to cancel enrollment via multichallenge"
)

// pendingEnrollment reports whether t was enrolled via multichallenge and
// still waits for its first OTP.
func pendingEnrollment(t *token.Token) bool {
	return t.RolloutState == token.StateClientWait && t.Info[infoEnrollVia] != ""
}

// ignorePending reports whether t, a token waiting for the first OTP of
// its enrollment via multichallenge, is left out of the count of the
// user's tokens: for a new login (not for the answer to the enrollment's
// challenge, which must reach the token).
func (q *req) ignorePending(t *token.Token) bool {
	return q.r.TransactionID == "" && pendingEnrollment(t)
}

// afterSuccess runs after a success that the policies let stand:
// client_mode_per_user remembers the token type, and
// enroll_via_multichallenge may turn the success into an enrollment
// challenge. typ is the type that authenticated ("" for none).
func (q *req) afterSuccess(ctx context.Context, res Response, typ string) (Response, error) {
	if err := q.rememberClientMode(ctx, typ); err != nil {
		return res, err
	}
	return q.enroll(ctx, res)
}

// enroll is enroll_via_multichallenge after a success on the user path.
func (q *req) enroll(ctx context.Context, res Response) (Response, error) {
	if !res.Value || !q.found || q.r.User == "" || q.r.Serial != "" {
		return res, nil
	}
	typ, name, err := q.pol.valueNamed(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge")
	typ = strings.ToLower(strings.TrimSpace(typ))
	if err != nil || typ == "" {
		return res, err
	}
	svc := q.v.cfg.Tokens
	log := zerolog.Ctx(ctx).With().Str("component", "validate").Str("user", q.u.Login).Str("realm", q.u.Realm).
		Str("token_type", typ).Logger()
	via, ok := svc.Types().EnrollVia(typ)
	qr := via.QR
	if !ok {
		log.Warn().Str("policy", name).Msg("enroll_via_multichallenge: this token type can not be enrolled during authentication")
		return res, nil
	}
	toks, err := svc.ByOwner(ctx, q.u)
	if err != nil {
		return res, err
	}
	var pending *token.Token
	for _, t := range toks {
		if t.Type != typ {
			continue
		}
		if !pendingEnrollment(t) || t.Revoked {
			return res, nil // the user has a token of this type
		}
		pending = t
	}
	info := q.ownerInfo(ctx)
	p, err := q.enrollParams(ctx, via, info)
	if err != nil || p == nil {
		if p == nil && err == nil {
			log.Info().Msg("enroll_via_multichallenge: the user store has no address for this token type")
		}
		return res, err
	}
	// The enrollment policies of /token/init, with the user's scope for
	// the type's defaults.
	enr, err := token.EnrollPolicies(ctx, enrollReader{&q.pol}, policy.ScopeUser, typ, p)
	if apierr.Is(err, apierr.Parameter) {
		log.Info().Err(err).Msg("enroll_via_multichallenge: an enrollment policy refuses this token")
		return res, nil
	} else if err != nil {
		return res, err
	}
	if pending != nil {
		// The pending token is enrolled anew: it counts already.
		enr.Limits = token.Limits{}
	}
	optName, err := q.pol.flag(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge_optional")
	if err != nil {
		return res, err
	}
	text, textName, err := q.pol.valueNamed(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge_text")
	if err != nil {
		return res, err
	}
	serial := ""
	if pending != nil {
		serial = pending.Serial
	}
	owner := q.u
	init := token.InitRequest{Type: typ, Serial: serial, Params: p, Owner: &owner, OwnerInfo: info,
		RolloutState: token.StateClientWait, Info: map[string]string{infoEnrollVia: "True"}}
	enr.Apply(&init)
	// The first OTP answers the enrollment challenge: no verification
	// step of its own.
	init.Verify = false
	t, detail, err := svc.Init(ctx, init)
	if errors.Is(err, token.ErrMaxPerUser) || errors.Is(err, token.ErrMaxPerRealm) {
		// A limit keeps the user's success without a new token.
		return res, nil
	} else if err != nil {
		return res, err
	}
	txid, err := svc.NewTransactionID()
	if err != nil {
		return res, err
	}
	session := sessionEnroll
	if optName != "" {
		session = sessionEnrollOptional
	}
	opts, err := q.pol.challengeOpts(ctx)
	if err != nil {
		return res, err
	}
	cres, _, err := svc.CreateSessionChallenge(ctx, t, txid, session, opts, info)
	if err != nil {
		// Nothing was enrolled: the token goes again, and the user keeps
		// the success (as when a policy forbids the enrollment).
		if derr := svc.Delete(context.WithoutCancel(ctx), t.Serial); derr != nil && !apierr.Is(derr, apierr.ResourceNotFound) {
			return res, derr
		}
		if _, coded := errors.AsType[*apierr.Error](err); !coded {
			return res, err
		}
		log.Warn().Err(err).Str("serial", t.Serial).Msg("enroll_via_multichallenge: the challenge of the new token could not be sent")
		return res, nil
	}
	q.pol.note(name, textName, optName)
	msg := text
	if msg == "" {
		msg = MsgEnrollScan
		if !qr {
			msg = cres.Message
		}
	}
	ch := Challenge{TransactionID: txid, Serial: t.Serial, Type: t.Type, ClientMode: cres.ClientMode, Message: msg}
	if qr {
		// The otpauth URL and its QR code, as /token/init answers them.
		if g, ok := detail["googleurl"].(map[string]any); ok {
			ch.Image, _ = g["img"].(string)
			ch.Link, _ = g["value"].(string)
		}
	}
	if len(cres.Attributes) > 0 {
		ch.Attributes = cres.Attributes
	}
	out := challengeAnswer(q.u, []Challenge{ch}, msg, []string{txid})
	out.Enrollment, out.EnrollmentOptional = true, optName != ""
	if err := q.challengeShape(ctx, &out); err != nil {
		return res, err
	}
	log.Info().Str("serial", t.Serial).Msg("enroll_via_multichallenge: token enrolled, waiting for its first OTP")
	return out, nil
}

// enrollParams are the init parameters of the new token that depend on
// the enrollment during an authentication (EnrollPolicies adds the
// policy defaults): a generated key; email and sms read the user store's
// address (nil when it has none); sms sends through the first gateway of
// the user's sms_gateways.
func (q *req) enrollParams(ctx context.Context, via token.EnrollVia, info map[string]string) (token.Params, error) {
	p := token.Params{"genkey": "1"}
	switch via.Channel {
	case token.ChannelEmail:
		if strings.TrimSpace(info["email"]) == "" {
			return nil, nil
		}
		p["dynamic_email"] = "1"
		// The SMTP server: the one that is defined, when there is
		// exactly one (without, the mail can not be sent and the
		// enrollment is skipped).
		if n := q.v.cfg.Tokens.Notify(); n != nil {
			defs, err := n.SMTPServers(ctx)
			if err != nil {
				return nil, err
			}
			if len(defs) == 1 {
				p[token.EmailIdentifier] = defs[0].Identifier
			}
		}
	case token.ChannelSMS:
		if strings.TrimSpace(info["mobile"]) == "" {
			return nil, nil
		}
		p["dynamic_phone"] = "1"
		// The gateway: the first one the user may choose for new SMS
		// tokens.
		v, err := q.pol.value(ctx, policy.ScopeUser, "sms_gateways")
		if err != nil {
			return nil, err
		}
		if f := strings.Fields(v); len(f) > 0 {
			p[token.SMSIdentifier] = f[0]
		}
	}
	return p, nil
}

// ownerInfo reads the user's attributes from the user store as strings
// (none when the store does not answer).
func (q *req) ownerInfo(ctx context.Context) map[string]string {
	info := map[string]string{}
	if q.in == nil || q.u.UID == "" {
		return info
	}
	ui, err := q.in.User(ctx, q.u.UID)
	if err != nil {
		return info
	}
	return ui.Strings()
}

// challengeOpts are the AUTH policy values handed to a token type that
// makes a challenge (texts, mail subject, validity).
func (p *policies) challengeOpts(ctx context.Context) (token.Params, error) {
	opts := token.Params{}
	for _, a := range challengeOptions {
		v, err := p.value(ctx, policy.ScopeAuthentication, a)
		if err != nil {
			return nil, err
		}
		if v != "" {
			opts[a] = v
		}
	}
	return opts, nil
}

// enrollAnswer answers the challenge of an enrollment via multichallenge:
// all are the user's tokens, bySerial the challenges of the transaction.
// ok is false when the transaction is no such enrollment. The token is
// checked with the password as OTP; a match commits it as enrolled (in
// the same transaction as the OTP's use) and authenticates; a mismatch
// counts as a failure of the token, which stays in clientwait.
func (q *req) enrollAnswer(ctx context.Context, all []*token.Token, bySerial map[string]*token.Challenge) (Response, bool, error) {
	svc := q.v.cfg.Tokens
	var t *token.Token
	var ch *token.Challenge
	for _, c := range all {
		if x, ok := bySerial[c.Serial]; ok && (x.Session == sessionEnroll || x.Session == sessionEnrollOptional) && pendingEnrollment(c) {
			t, ch = c, x
			break
		}
	}
	if t == nil {
		return Response{}, false, nil
	}
	if q.v.cfg.Now().Before(ch.Expiration) {
		m, err := svc.Verify(ctx, t, q.r.Pass, q.r.Options, ch)
		if err != nil && !errors.Is(err, token.ErrCorrupt) {
			return Response{}, true, err
		}
		if m.OK {
			m.Rollout = true
			committed, stale, err := q.commit(ctx, t, m, MsgFoundChallenge)
			var ue *token.UnusableError
			switch {
			case errors.Is(err, token.ErrReplay), errors.As(err, &ue):
			case err != nil:
				return Response{}, true, err
			default:
				if _, err := svc.DeleteTransaction(ctx, q.r.TransactionID); err != nil {
					return Response{}, true, err
				}
				zerolog.Ctx(ctx).Info().Str("component", "validate").Str("user", q.u.Login).Str("realm", q.u.Realm).
					Str("serial", t.Serial).Msg("enroll_via_multichallenge: the new token is enrolled")
				if err := q.resetAll(ctx, committed); err != nil {
					return Response{}, true, err
				}
				return q.success(MsgFoundChallenge, committed, stale), true, nil
			}
		}
	}
	if err := svc.ChallengeAnswered(ctx, q.r.TransactionID, t.Serial, false); err != nil {
		return Response{}, true, err
	}
	if err := svc.Fail(ctx, t.Serial, true); err != nil {
		return Response{}, true, err
	}
	return Response{User: q.u, Message: MsgResponseNoMatch, Serial: t.Serial, Type: t.Type}, true, nil
}

// cancelEnrollment is cancel_enrollment=1 with a transaction_id: the token
// of an optional enrollment via multichallenge is removed and the
// authentication succeeds. A transaction that is unknown, expired, no
// optional enrollment, or whose token belongs to another user than the
// request names, fails.
func (v *Validator) cancelEnrollment(ctx context.Context, r Request, a *auditor) (q *req, _ Response, err error) {
	txid := strings.TrimSpace(r.TransactionID)
	if txid == "" {
		return nil, Response{}, apierr.MissingParameter("transaction_id")
	}
	if q, err = v.start(ctx, r, a); err != nil {
		return q, Response{}, err
	}
	fail := Response{User: q.u, Message: MsgEnrollCancelFailed}
	svc := v.cfg.Tokens
	chs, err := svc.Challenges(ctx, token.ChallengeFilter{TransactionID: txid})
	if err != nil {
		return q, Response{}, err
	}
	if len(chs) != 1 || chs[0].Session != sessionEnrollOptional {
		return q, fail, nil
	}
	t, err := svc.Get(ctx, chs[0].Serial)
	if apierr.Is(err, apierr.ResourceNotFound) {
		return q, fail, nil
	}
	if err != nil {
		return q, Response{}, err
	}
	if !t.Assigned() || (r.Serial != "" && r.Serial != t.Serial) ||
		(r.User != "" && (!q.found || t.Owner.UID != q.u.UID || t.Owner.Resolver != q.u.Resolver)) {
		return q, fail, nil
	}
	ok, err := svc.CancelRollout(ctx, txid, t.Serial, sessionEnrollOptional)
	if err != nil || !ok {
		return q, fail, err
	}
	q.u, q.found = *t.Owner, true
	zerolog.Ctx(ctx).Info().Str("component", "validate").Str("user", q.u.Login).Str("realm", q.u.Realm).
		Str("serial", t.Serial).Msg("enroll_via_multichallenge: enrollment cancelled, token removed")
	if err := q.pol.authorized(ctx); err != nil {
		return q, Response{}, err
	}
	return q, Response{Value: true, User: q.u, Message: MsgEnrollCancelled}, nil
}

// enrollReader reads the enrollment policies of token.EnrollPolicies from
// the request's policy snapshot.
type enrollReader struct{ p *policies }

var _ token.PolicyReader = enrollReader{}

func (r enrollReader) Value(ctx context.Context, scope, action string) (string, []string, error) {
	v, name, err := r.p.valueNamed(ctx, scope, action)
	if name == "" {
		return v, nil, err
	}
	return v, []string{name}, err
}

func (r enrollReader) Flag(ctx context.Context, scope, action string) (bool, []string, error) {
	name, err := r.p.flag(ctx, scope, action)
	if name == "" {
		return false, nil, err
	}
	return true, []string{name}, err
}
