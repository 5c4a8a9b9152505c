package token

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/notify"
)

// Email is the e-mail token (prefix PIEM): an HOTP token whose values are
// mailed when its PIN is given. Each challenge advances the counter by
// one and mails the value of the new counter, so the normal HOTP window
// (which starts at the stored counter) finds it and a used value can
// never be accepted again.
//
// Tokeninfo: "email" (the address) or "dynamic_email" = "True" (the
// owner's user store attribute "email" is read at challenge time), and
// optionally "email.identifier" (the SMTP server definition).
type Email struct{}

var (
	_ Type       = Email{}
	_ Challenger = Email{}
	_ Resyncer   = Email{}
)

// ErrEmailNotSent is privacyIDEA's answer when the e-mail of a challenge
// cannot be sent. The returned error carries the cause (the notify error)
// hidden, and errors.Is(err, ErrEmailNotSent) holds.
var ErrEmailNotSent = apierr.New(apierr.Validate, "The PIN was correct, but the EMail could not be sent!")

// Tokeninfo keys and request options of the e-mail token.
const (
	InfoEmail        = "email"
	InfoDynamicEmail = "dynamic_email"
	// EmailIdentifier names the SMTP server definition, as tokeninfo, as
	// a challenge option, or as the system setting all e-mail tokens
	// without one fall back on.
	EmailIdentifier = "email.identifier"
	// EmailValidTime is the validity of an e-mail challenge in seconds,
	// as a challenge option or system setting (default 120).
	EmailValidTime = "email.validtime"

	defaultEmailText      = "<otp>"
	defaultEmailSubject   = "Your OTP"
	defaultEmailChallenge = "Enter the OTP from the Email"
	defaultEmailValidity  = 120 * time.Second
	maxRemoteAddrLen      = 254
)

// Name implements Type.
func (Email) Name() string { return "email" }

// Prefix implements Type.
func (Email) Prefix() string { return "PIEM" }

// Enroll implements Type: the HOTP key (generated unless otpkey is given)
// and HOTP's init detail, plus the address: "email", or "dynamic_email"
// to use the owner's address at challenge time.
func (Email) Enroll(ctx context.Context, e *Enroll) error {
	t, p := e.Token, e.Params
	if p.Bool("dynamic_email") {
		t.SetInfo(InfoDynamicEmail, "True")
		delete(t.Info, InfoEmail)
	} else {
		addr, given := p.Get("email")
		addr = strings.TrimSpace(addr)
		switch {
		case given && addr != "":
			if err := emailCheckAddress(addr); err != nil {
				return err
			}
			t.SetInfo(InfoEmail, addr)
		case e.New || t.Info[InfoEmail] == "":
			return apierr.MissingParameter("email")
		}
		delete(t.Info, InfoDynamicEmail)
	}
	if v, ok := p.Get(EmailIdentifier); ok {
		if remoteHasControl(v) {
			return paramErr("The %s contains invalid characters.", EmailIdentifier)
		}
		t.SetInfo(EmailIdentifier, v)
	}
	return enrollOATH(e, "email", 0)
}

// Check implements Type with the HOTP window (no AutoResync: the values
// are sent one at a time).
func (Email) Check(ctx context.Context, c *Check) (Match, error) { return checkHOTP(c, false) }

// Resync implements Resyncer as HOTP does.
func (Email) Resync(ctx context.Context, s *Service, t *Token, otp1, otp2 string, now time.Time) (func(*Token) bool, bool, error) {
	return HOTP{}.Resync(ctx, s, t, otp1, otp2, now)
}

// Challenge implements Challenger. Options read: email_challenge_text,
// email.validtime (seconds; else the system setting, else 120),
// emailsubject, emailtext (tags <otp> {otp} {user} {serial}) and
// email.identifier (used when the token has none; else the system
// setting). Without an SMTP server nothing is committed and the error's
// hidden cause (SendCause) names the setting to make.
func (Email) Challenge(ctx context.Context, r *ChallengeRequest) (*ChallengeResult, error) {
	t := r.Token
	addr := t.Info[InfoEmail]
	if IsTrue(t.Info[InfoDynamicEmail]) {
		addr = strings.TrimSpace(r.OwnerInfo["email"])
		if addr == "" {
			return nil, remoteNotSent(ErrEmailNotSent, fmt.Errorf("token %s: the owner has no e-mail address", t.Serial))
		}
	}
	if err := emailCheckAddress(addr); err != nil {
		return nil, remoteNotSent(ErrEmailNotSent, fmt.Errorf("token %s: %w", t.Serial, err))
	}
	set := r.Service.settings()
	smtpID := firstSet(t.Info[EmailIdentifier], r.Options.Str(EmailIdentifier), set.Value(EmailIdentifier))
	if smtpID == "" {
		return nil, remoteNotSent(ErrEmailNotSent, fmt.Errorf("e-mail token %s has no SMTP server: set the system setting %s or the token's %s", t.Serial, EmailIdentifier, EmailIdentifier))
	}
	user := remoteUser(t, r.OwnerInfo)
	tags := remoteTags{user: user, serial: t.Serial, email: addr}
	msg := defaultEmailChallenge
	if v := r.Options.Str("email_challenge_text"); v != "" {
		msg = tags.replace(v)
	}
	subject, body := defaultEmailSubject, defaultEmailText
	if v := r.Options.Str("emailsubject"); v != "" {
		subject = v
	}
	if v := r.Options.Str("emailtext"); v != "" {
		body = v
	}
	svc := r.Service
	validity := remoteSeconds(firstSet(r.Options.Str(EmailValidTime), set.Value(EmailValidTime)), defaultEmailValidity)
	res := &ChallengeResult{
		Message:    msg,
		ClientMode: "interactive",
		Validity:   validity,
		Attributes: remoteAttributes(r, validity),
		Apply:      func(t *Token) { t.Count++ },
		Send: func(ctx context.Context, t *Token) error {
			value, err := remoteHOTP(svc, t)
			if err != nil {
				return remoteNotSent(ErrEmailNotSent, err)
			}
			n := svc.Notify()
			if n == nil {
				return remoteNotSent(ErrEmailNotSent, fmt.Errorf("e-mail token %s: this server has no notification service to send through", t.Serial))
			}
			tags := tags
			tags.otp = value
			err = n.SendMail(ctx, smtpID, notify.Mail{To: []string{addr}, Subject: tags.replace(subject), Body: tags.replace(body)})
			if err != nil {
				return remoteNotSent(ErrEmailNotSent, fmt.Errorf("e-mail token %s, SMTP server %s: %w", t.Serial, smtpID, err))
			}
			return nil
		},
	}
	return res, nil
}

// emailCheckAddress refuses addresses with control characters (header
// injection) or that are not RFC 5322 addresses.
func emailCheckAddress(addr string) error {
	if addr == "" {
		return apierr.MissingParameter("email")
	}
	if remoteHasControl(addr) || len(addr) > maxRemoteAddrLen {
		return paramErr("The email address contains invalid characters or is too long.")
	}
	if _, err := mail.ParseAddress(addr); err != nil {
		return paramErr("The email address is not valid.")
	}
	return nil
}

// emailRedact keeps the first character of the local part and the
// domain: a****@example.org.
func emailRedact(addr string) string {
	if a, err := mail.ParseAddress(addr); err == nil {
		addr = a.Address
	}
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 {
		return "****"
	}
	_, n := utf8.DecodeRuneInString(addr)
	return addr[:n] + "****" + addr[at:]
}

// phoneRedact keeps the last four characters of the number and masks the
// others, keeping the length.
func phoneRedact(phone string) string {
	r := []rune(phone)
	for i := range max(len(r)-4, 0) {
		r[i] = '*'
	}
	return string(r)
}

// remoteTags are the substitutions of challenge texts and messages.
type remoteTags struct {
	user, serial, email, phone, otp string
}

// replace substitutes {user} {serial} {email} {email_redacted} {phone}
// {phone_redacted} and, when set, the OTP for <otp> and {otp}.
func (g remoteTags) replace(s string) string {
	pairs := []string{"{user}", g.user, "{serial}", g.serial,
		"{email}", g.email, "{email_redacted}", emailRedact(g.email),
		"{phone}", g.phone, "{phone_redacted}", phoneRedact(g.phone)}
	if g.otp != "" {
		pairs = append(pairs, "<otp>", g.otp, "{otp}", g.otp)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// remoteUser is the owner's login for the {user} tag.
func remoteUser(t *Token, info map[string]string) string {
	if t.Owner != nil && t.Owner.Login != "" {
		return t.Owner.Login
	}
	return info["username"]
}

// remoteSeconds reads a validity in seconds; missing, malformed or
// non-positive values give def.
func remoteSeconds(v string, def time.Duration) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return def
	}
	return time.Duration(n) * time.Second
}

// remoteAttributes are the challenge attributes privacyIDEA sends for an
// e-mail or SMS challenge: "state", the transaction id passed in (null for
// the first token challenged), and "valid_until", the challenge's end in
// the server's local time as Python prints a datetime.
func remoteAttributes(r *ChallengeRequest, validity time.Duration) map[string]any {
	var state any
	if r.State != "" {
		state = r.State
	}
	return map[string]any{"state": state, "valid_until": r.Now.Add(validity).Local().Format("2006-01-02 15:04:05.000000")}
}

// remoteHOTP is the value to send for the committed counter.
func remoteHOTP(s *Service, t *Token) (string, error) {
	key, err := s.Secret(t, FieldKey)
	if err != nil {
		return "", err
	}
	if key == nil {
		return "", fmt.Errorf("token %s: no key", t.Serial)
	}
	return otp.HOTP(key, t.Count, t.OTPLen, t.Hash()), nil
}

// firstSet returns the first non-empty value.
func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// SendCause returns the hidden cause of a challenge that could not be
// sent (ErrEmailNotSent, ErrSMSNotSent): the configuration that is
// missing or the failure of the SMTP server or SMS gateway, naming the
// serial and never the OTP value. It is nil for other errors. The cause
// is for the log; the client sees only privacyIDEA's message.
func SendCause(err error) error {
	e, ok := errors.AsType[*apierr.Error](err)
	if !ok || (!errors.Is(err, ErrEmailNotSent) && !errors.Is(err, ErrSMSNotSent)) {
		return nil
	}
	j, ok := e.Err.(interface{ Unwrap() []error })
	if !ok {
		return e.Err
	}
	var causes []error
	for _, c := range j.Unwrap() {
		if c != ErrEmailNotSent && c != ErrSMSNotSent {
			causes = append(causes, c)
		}
	}
	return errors.Join(causes...)
}

// remoteNotSent is the send failure sentinel with its hidden cause; the
// sentinel stays in the chain for errors.Is.
func remoteNotSent(sentinel *apierr.Error, cause error) error {
	return sentinel.Wrap(errors.Join(sentinel, cause))
}

// remoteHasControl reports whether s holds a control character.
func remoteHasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }) >= 0
}

// ChallengesOnPIN implements PINChallenger: a correct PIN alone sends a challenge.
func (Email) ChallengesOnPIN() bool { return true }

// EnrollVia implements AuthEnroller: enroll_via_multichallenge can enroll it.
func (Email) EnrollVia() EnrollVia { return EnrollVia{Channel: ChannelEmail} }
