package validate

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// Messages of the generic challenges (AUTH resync_via_multichallenge and
// change_pin_via_validate), as privacyIDEA words them.
const (
	MsgResyncChallenge = "To resync your token, please enter the next OTP value"
	MsgNewPIN          = "Please enter a new PIN"
	MsgNewPINAgain     = "Please enter the new PIN again"
	MsgPINSet          = "PIN successfully set."
	MsgPINsDiffer      = "PINs do not match"
)

// challenger makes a request's challenges and shapes the answer that
// carries them: the challenges of the token types (a PIN alone, a
// triggerchallenge), the generic ones of resync_via_multichallenge and
// change_pin_via_validate, and the client mode and text policies of a
// challenge answer.
type challenger struct {
	v     *Validator
	t     *target
	pol   *policies
	modes *clientModes
}

// challengeOptions are the AUTH actions handed to the token types when
// they make a challenge.
var challengeOptions = []string{"emailtext", "emailsubject", "smstext", "email_challenge_text", "sms_challenge_text", "indexedsecret_challenge_text", "indexedsecret_count"}

// trigger creates the challenges of toks and builds the response.
func (c *challenger) trigger(ctx context.Context, toks []*token.Token) (Response, error) {
	svc := c.v.cfg.Tokens
	txid, err := svc.NewTransactionID()
	if err != nil {
		return Response{}, err
	}
	text, err := c.pol.value(ctx, policy.ScopeAuthentication, "challenge_text")
	if err != nil {
		return Response{}, err
	}
	incFail, err := c.pol.flag(ctx, policy.ScopeAuthentication, "increase_failcounter_on_challenge")
	if err != nil {
		return Response{}, err
	}
	// Only policies shape a challenge: the texts, the mail subject, the
	// validity and the server to send through never come from the
	// (anonymous) request.
	opts, err := c.pol.challengeOpts(ctx)
	if err != nil {
		return Response{}, err
	}
	info := c.t.info(ctx)
	var multi []Challenge
	var messages, tids []string
	var sendErr error
	for _, t := range toks {
		if svc.Unusable(t, c.v.cfg.Now()) != "" {
			continue
		}
		// As privacyIDEA, the first token challenged starts the
		// transaction and the later ones join it: their "state" is its id.
		state := ""
		if len(multi) > 0 {
			state = txid
		}
		res, _, err := svc.CreateChallenge(ctx, t, txid, state, opts, info)
		if err != nil {
			sendErr = err
			logNotSent(ctx, t, err, "the challenge could not be sent")
			continue
		}
		msg := res.Message
		if !svc.Types().ChallengesOnPIN(t.Type) {
			// <type>_challenge_text wins over challenge_text.
			own, err := c.pol.value(ctx, policy.ScopeAuthentication, t.Type+"_challenge_text")
			if err != nil {
				return Response{}, err
			}
			switch {
			case own != "":
				msg = own
			case text != "":
				msg = text
			}
		}
		ch := Challenge{TransactionID: txid, Serial: t.Serial, Type: t.Type, ClientMode: res.ClientMode, Message: msg}
		if len(res.Attributes) > 0 {
			ch.Attributes = res.Attributes
		}
		multi = append(multi, ch)
		if !slices.Contains(messages, msg) {
			messages = append(messages, msg)
		}
		tids = append(tids, txid)
		if incFail != "" {
			c.pol.note(incFail)
			if err := svc.Fail(ctx, t.Serial, false); err != nil {
				return Response{}, err
			}
		}
	}
	if len(multi) == 0 {
		if sendErr != nil {
			return Response{User: c.t.u, SendFailed: true, Message: sendErr.Error()}, sendErrIfInternal(sendErr)
		}
		return Response{User: c.t.u, Message: MsgNoActiveCR}, nil
	}
	res := challengeAnswer(c.t.u, multi, strings.Join(messages, ", "), tids)
	if err := c.shape(ctx, &res); err != nil {
		return Response{}, err
	}
	return res, nil
}

// challengeAnswer is the answer with the challenges multi (the last one
// gives the top-level serial, type, client mode, attributes and image).
func challengeAnswer(u user.User, multi []Challenge, msg string, tids []string) Response {
	last := multi[len(multi)-1]
	all := make([]string, len(multi))
	for i, c := range multi {
		all[i] = c.Message
	}
	return Response{
		User: u, Challenge: true, Message: msg, Messages: all, Challenges: multi,
		TransactionID: last.TransactionID, TransactionIDs: tids,
		Serial: last.Serial, Type: last.Type, ClientMode: last.ClientMode,
		Attributes: last.Attributes, Image: last.Image, Link: last.Link,
	}
}

// logNotSent logs why the challenge of t was not sent (the missing SMTP
// server or SMS gateway setting, the gateway's failure), which the
// client's answer does not tell: the hidden cause of a send failure,
// with the serial and never the OTP value. Other errors are the caller's
// to report.
func logNotSent(ctx context.Context, t *token.Token, err error, msg string) {
	cause := token.SendCause(err)
	if cause == nil {
		return
	}
	zerolog.Ctx(ctx).Error().Err(cause).Str("component", "validate").Str("serial", t.Serial).Str("token_type", t.Type).Msg(msg)
}

// sendErrIfInternal keeps coded send errors out of the error path (they
// become the detail message); others are returned.
func sendErrIfInternal(err error) error {
	if _, ok := errors.AsType[*apierr.Error](err); ok {
		return nil
	}
	return err
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

// generic stores a challenge of kind for t under a new
// transaction id and answers with it (value false, one interactive
// challenge).
func (c *challenger) generic(ctx context.Context, t *token.Token, kind, msg string, data []byte) (Response, error) {
	svc := c.v.cfg.Tokens
	txid, err := svc.NewTransactionID()
	if err != nil {
		return Response{}, err
	}
	if _, err := svc.CreateGenericChallenge(ctx, t, txid, kind, data); err != nil {
		return Response{}, err
	}
	ch := Challenge{TransactionID: txid, Serial: t.Serial, Type: t.Type, ClientMode: "interactive", Message: msg}
	res := challengeAnswer(c.t.u, []Challenge{ch}, msg, []string{txid})
	if err := c.shape(ctx, &res); err != nil {
		return Response{}, err
	}
	return res, nil
}

// resync is AUTH resync_via_multichallenge: the first value of
// an AutoResync was remembered for t (its PIN was right), and instead of
// "wrong otp value" the user is asked for the next value. ok is false
// when the policy is not set.
func (c *challenger) resync(ctx context.Context, t *token.Token) (Response, bool, error) {
	name, err := c.pol.flag(ctx, policy.ScopeAuthentication, "resync_via_multichallenge")
	if err != nil || name == "" {
		return Response{}, false, err
	}
	c.pol.note(name)
	res, err := c.generic(ctx, t, token.ChallengeResync, MsgResyncChallenge, nil)
	return res, true, err
}

// pinChange is AUTH change_pin_via_validate: a success of a token whose
// PIN change is due becomes a challenge asking for a new PIN.
func (c *challenger) pinChange(ctx context.Context, res Response, t *token.Token) (Response, error) {
	if !res.Value || !res.PINChange {
		return res, nil
	}
	name, err := c.pol.flag(ctx, policy.ScopeAuthentication, "change_pin_via_validate")
	if err != nil || name == "" {
		return res, err
	}
	c.pol.note(name)
	return c.generic(ctx, t, token.ChallengePINReset, MsgNewPIN, nil)
}

// shape applies preferred_client_mode, client_mode_per_user and the
// challenge text header and footer to a challenge answer.
func (c *challenger) shape(ctx context.Context, res *Response) error {
	multi, messages := res.Challenges, res.Messages
	modes := []string{"interactive", "webauthn", "poll"}
	v, name, err := c.pol.valueNamed(ctx, policy.ScopeAuthentication, "preferred_client_mode")
	if err != nil {
		return err
	}
	if f := strings.Fields(v); len(f) > 0 {
		modes = f
		c.pol.note(name)
	}
	preferred := "interactive"
	for _, m := range modes {
		if slices.ContainsFunc(multi, func(x Challenge) bool { return x.ClientMode == m }) {
			preferred = m
			break
		}
	}
	if m, err := c.modes.prefer(ctx, multi); err != nil {
		return err
	} else if m != "" {
		preferred = m
	}
	res.PreferredClientMode = preferred

	header, hname, err := c.pol.valueNamed(ctx, policy.ScopeAuthentication, "challenge_text_header")
	if err != nil || header == "" {
		return err
	}
	footer, fname, err := c.pol.valueNamed(ctx, policy.ScopeAuthentication, "challenge_text_footer")
	if err != nil {
		return err
	}
	c.pol.note(hname, fname)
	texts := slices.Clone(messages)
	slices.Sort(texts)
	texts = slices.Compact(texts)
	var b strings.Builder
	b.WriteString(header)
	if tail := strings.ToLower(header[max(0, len(header)-4):]); tail == "<ol>" || tail == "<ul>" {
		for _, t := range texts {
			b.WriteString("<li>" + t + "</li>\n")
		}
	} else {
		b.WriteString("\n" + strings.Join(texts, ", ") + "\n")
	}
	b.WriteString(footer)
	res.Message = b.String()
	return nil
}
