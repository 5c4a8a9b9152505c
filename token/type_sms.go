package token

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
)

// SMS is the SMS token (prefix PISM): an HOTP token whose values are sent
// through an SMS gateway when its PIN is given. Like Email, each
// challenge advances the counter by one and sends the value of the new
// counter.
//
// Tokeninfo: "phone" (the number) or "dynamic_phone" = "True" (the
// owner's user store attribute "mobile" is read at challenge time), and
// "sms.identifier" (the SMS gateway name).
type SMS struct{}

var (
	_ Type       = SMS{}
	_ Challenger = SMS{}
	_ Resyncer   = SMS{}
)

// ErrSMSNotSent is privacyIDEA's answer when the SMS of a challenge
// cannot be sent. The returned error carries the cause (the notify error)
// hidden, and errors.Is(err, ErrSMSNotSent) holds.
var ErrSMSNotSent = apierr.New(apierr.Validate, "The PIN was correct, but the SMS could not be sent!")

// Tokeninfo keys and request options of the SMS token.
const (
	InfoPhone        = "phone"
	InfoDynamicPhone = "dynamic_phone"
	// SMSIdentifier names the SMS gateway, as tokeninfo or as a request
	// option (system setting).
	SMSIdentifier = "sms.identifier"

	defaultSMSText      = "<otp>"
	defaultSMSChallenge = "Enter the OTP from the SMS:"
	defaultSMSValidity  = 300 * time.Second
	maxPhoneLen         = 64
)

// Name implements Type.
func (SMS) Name() string { return "sms" }

// Prefix implements Type.
func (SMS) Prefix() string { return "PISM" }

// Enroll implements Type: the HOTP key (generated unless otpkey is given)
// and HOTP's init detail, plus "phone" (or "dynamic_phone" to use the
// owner's mobile number at challenge time) and "sms.identifier".
func (SMS) Enroll(ctx context.Context, e *Enroll) error {
	t, p := e.Token, e.Params
	if p.Bool("dynamic_phone") {
		t.SetInfo(InfoDynamicPhone, "True")
		delete(t.Info, InfoPhone)
	} else {
		phone, given := p.Get("phone")
		phone = strings.TrimSpace(phone)
		switch {
		case given && phone != "":
			if err := smsCheckPhone(phone); err != nil {
				return err
			}
			t.SetInfo(InfoPhone, phone)
		case e.New || t.Info[InfoPhone] == "":
			return apierr.MissingParameter("phone")
		}
		delete(t.Info, InfoDynamicPhone)
	}
	if v, ok := p.Get(SMSIdentifier); ok {
		if remoteHasControl(v) || strings.ContainsRune(v, '/') {
			return paramErr("The %s contains invalid characters.", SMSIdentifier)
		}
		t.SetInfo(SMSIdentifier, v)
	}
	return enrollOATH(e, "sms", 0)
}

// Check implements Type with the HOTP window (no AutoResync: the values
// are sent one at a time).
func (SMS) Check(ctx context.Context, c *Check) (Match, error) { return checkHOTP(c, false) }

// Resync implements Resyncer as HOTP does.
func (SMS) Resync(ctx context.Context, s *Service, t *Token, otp1, otp2 string, now time.Time) (func(*Token) bool, bool, error) {
	return HOTP{}.Resync(ctx, s, t, otp1, otp2, now)
}

// Challenge implements Challenger. Options read: sms_challenge_text,
// sms.providerTimeout (seconds, default 300), smstext (tags <otp> {otp}
// {user} {serial}) and sms.identifier (used when the token has none).
func (SMS) Challenge(ctx context.Context, r *ChallengeRequest) (*ChallengeResult, error) {
	t := r.Token
	phone := t.Info[InfoPhone]
	if IsTrue(t.Info[InfoDynamicPhone]) {
		phone = strings.TrimSpace(r.OwnerInfo["mobile"])
		if phone == "" {
			return nil, remoteNotSent(ErrSMSNotSent, fmt.Errorf("token %s: the owner has no mobile number", t.Serial))
		}
	}
	if err := smsCheckPhone(phone); err != nil {
		return nil, remoteNotSent(ErrSMSNotSent, fmt.Errorf("token %s: %w", t.Serial, err))
	}
	gateway := t.Info[SMSIdentifier]
	if gateway == "" {
		gateway = r.Options.Str(SMSIdentifier)
	}
	tags := remoteTags{user: remoteUser(t, r.OwnerInfo), serial: t.Serial, phone: phone}
	msg := defaultSMSChallenge
	if v := r.Options.Str("sms_challenge_text"); v != "" {
		msg = tags.replace(v)
	}
	text := defaultSMSText
	if v := r.Options.Str("smstext"); v != "" {
		text = v
	}
	svc := r.Service
	validity := remoteSeconds(r.Options.Str("sms.providerTimeout"), defaultSMSValidity)
	res := &ChallengeResult{
		Message:    msg,
		ClientMode: "interactive",
		Validity:   validity,
		Attributes: remoteAttributes(r, validity),
		Apply:      func(t *Token) { t.Count++ },
		Send: func(ctx context.Context, t *Token) error {
			value, err := remoteHOTP(svc, t)
			if err != nil {
				return remoteNotSent(ErrSMSNotSent, err)
			}
			if gateway == "" {
				return remoteNotSent(ErrSMSNotSent, fmt.Errorf("token %s: no SMS gateway is configured (%s)", t.Serial, SMSIdentifier))
			}
			n := svc.Notify()
			if n == nil {
				return remoteNotSent(ErrSMSNotSent, errors.New("token: no notification service"))
			}
			tags := tags
			tags.otp = value
			if err := n.SendSMS(ctx, gateway, phone, tags.replace(text)); err != nil {
				return remoteNotSent(ErrSMSNotSent, fmt.Errorf("token %s: %w", t.Serial, err))
			}
			return nil
		},
	}
	return res, nil
}

// smsCheckPhone refuses empty, overlong numbers, numbers without a digit
// and control characters.
func smsCheckPhone(phone string) error {
	switch {
	case phone == "":
		return apierr.MissingParameter("phone")
	case len(phone) > maxPhoneLen || remoteHasControl(phone):
		return paramErr("The phone number contains invalid characters or is too long.")
	case !strings.ContainsAny(phone, "0123456789"):
		return paramErr("The phone number is not valid.")
	}
	return nil
}

// ChallengesOnPIN implements PINChallenger: a correct PIN alone sends a challenge.
func (SMS) ChallengesOnPIN() bool { return true }

// EnrollVia implements AuthEnroller: enroll_via_multichallenge can enroll it.
func (SMS) EnrollVia() EnrollVia { return EnrollVia{Channel: ChannelSMS} }
