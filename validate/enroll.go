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

// enroller enrolls a token of the type AUTH enroll_via_multichallenge
// names for a user who authenticated without having one, and answers
// with the challenge of its first OTP (the responder checks that OTP).
type enroller struct {
	v   *Validator
	r   *Request
	t   *target
	pol *policies
	ch  *challenger
}

// enroll is enroll_via_multichallenge after a success on the user path.
func (e *enroller) enroll(ctx context.Context, res Response) (Response, error) {
	if !res.Value || !e.t.found || e.r.User == "" || e.r.Serial != "" {
		return res, nil
	}
	typ, name, err := e.pol.valueNamed(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge")
	typ = strings.ToLower(strings.TrimSpace(typ))
	if err != nil || typ == "" {
		return res, err
	}
	svc := e.v.cfg.Tokens
	log := zerolog.Ctx(ctx).With().Str("component", "validate").Str("user", e.t.u.Login).Str("realm", e.t.u.Realm).
		Str("token_type", typ).Logger()
	via, ok := svc.Types().EnrollVia(typ)
	qr := via.QR
	if !ok {
		log.Warn().Str("policy", name).Msg("enroll_via_multichallenge: this token type can not be enrolled during authentication")
		return res, nil
	}
	toks, err := svc.ByOwner(ctx, e.t.u)
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
	info := e.t.info(ctx)
	p, err := e.params(ctx, via, info)
	if err != nil || p == nil {
		if p == nil && err == nil {
			log.Info().Msg("enroll_via_multichallenge: the user store has no address for this token type")
		}
		return res, err
	}
	// The enrollment policies of /token/init, with the user's scope for
	// the type's defaults.
	enr, err := token.EnrollPolicies(ctx, enrollReader{e.pol}, policy.ScopeUser, typ, p)
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
	optName, err := e.pol.flag(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge_optional")
	if err != nil {
		return res, err
	}
	text, textName, err := e.pol.valueNamed(ctx, policy.ScopeAuthentication, "enroll_via_multichallenge_text")
	if err != nil {
		return res, err
	}
	serial := ""
	if pending != nil {
		serial = pending.Serial
	}
	owner := e.t.u
	init := token.InitRequest{Type: typ, Serial: serial, Params: p, Owner: &owner, OwnerInfo: info,
		RolloutState: token.StateClientWait, Info: map[string]string{infoEnrollVia: "True"}}
	enr.Apply(&init)
	// The first OTP answers the enrollment challenge: no verification
	// step of its own.
	init.Verify = false
	// The challenge shows googleurl's image, and only for a QR type.
	init.NoImages, init.ImagesOf = !qr, []string{"googleurl"}
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
	opts, err := e.pol.challengeOpts(ctx)
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
		if cause := token.SendCause(err); cause != nil {
			err = cause
		}
		log.Warn().Err(err).Str("serial", t.Serial).Msg("enroll_via_multichallenge: the challenge of the new token could not be sent")
		return res, nil
	}
	e.pol.note(name, textName, optName)
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
	out := challengeAnswer(e.t.u, []Challenge{ch}, msg, []string{txid})
	out.Enrollment, out.EnrollmentOptional = true, optName != ""
	if err := e.ch.shape(ctx, &out); err != nil {
		return res, err
	}
	log.Info().Str("serial", t.Serial).Msg("enroll_via_multichallenge: token enrolled, waiting for its first OTP")
	return out, nil
}

// params are the init parameters of the new token that depend on
// the enrollment during an authentication (EnrollPolicies adds the
// policy defaults): a generated key; email and sms read the user store's
// address (nil when it has none); sms sends through the first gateway of
// the user's sms_gateways.
func (e *enroller) params(ctx context.Context, via token.EnrollVia, info map[string]string) (token.Params, error) {
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
		if n := e.v.cfg.Tokens.Notify(); n != nil {
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
		v, err := e.pol.value(ctx, policy.ScopeUser, "sms_gateways")
		if err != nil {
			return nil, err
		}
		if f := strings.Fields(v); len(f) > 0 {
			p[token.SMSIdentifier] = f[0]
		}
	}
	return p, nil
}

// cancelEnrollment is cancel_enrollment=1 with a transaction_id: the token
// of an optional enrollment via multichallenge is removed and the
// authentication succeeds. A transaction that is unknown, expired, no
// optional enrollment, or whose token belongs to another user than the
// request names, fails.
func (v *Validator) cancelEnrollment(ctx context.Context, r Request, a *auditor) (Response, error) {
	txid := strings.TrimSpace(r.TransactionID)
	if txid == "" {
		return Response{}, apierr.MissingParameter("transaction_id")
	}
	q, err := v.start(ctx, r, a)
	if err != nil {
		return Response{}, err
	}
	fail := Response{User: q.t.u, Message: MsgEnrollCancelFailed}
	svc := v.cfg.Tokens
	chs, err := svc.Challenges(ctx, token.ChallengeFilter{TransactionID: txid})
	if err != nil {
		return Response{}, err
	}
	if len(chs) != 1 || chs[0].Session != sessionEnrollOptional {
		return fail, nil
	}
	t, err := svc.Get(ctx, chs[0].Serial)
	if apierr.Is(err, apierr.ResourceNotFound) {
		return fail, nil
	}
	if err != nil {
		return Response{}, err
	}
	if !t.Assigned() || (r.Serial != "" && r.Serial != t.Serial) ||
		(r.User != "" && (!q.t.found || t.Owner.UID != q.t.u.UID || t.Owner.Resolver != q.t.u.Resolver)) {
		return fail, nil
	}
	ok, err := svc.CancelRollout(ctx, txid, t.Serial, sessionEnrollOptional)
	if err != nil || !ok {
		return fail, err
	}
	q.t.u, q.t.found = *t.Owner, true
	zerolog.Ctx(ctx).Info().Str("component", "validate").Str("user", q.t.u.Login).Str("realm", q.t.u.Realm).
		Str("serial", t.Serial).Msg("enroll_via_multichallenge: enrollment cancelled, token removed")
	if err := q.pol.authorized(ctx); err != nil {
		return Response{}, err
	}
	return Response{Value: true, User: q.t.u, Message: MsgEnrollCancelled}, nil
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
