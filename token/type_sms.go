package token

import (
	"context"
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
	// SMSIdentifier names the SMS gateway, as tokeninfo, as a challenge
	// option, or as the system setting all SMS tokens without one fall
	// back on.
	SMSIdentifier = "sms.identifier"
	// SMSProviderTimeout is the validity of an SMS challenge in seconds,
	// as a challenge option or system setting (default 300).
	SMSProviderTimeout = "sms.providerTimeout"

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
// sms.providerTimeout (seconds; else the system setting, else 300),
// smstext (tags <otp> {otp} {user} {serial}) and sms.identifier (used
// when the token has none; else the system setting). Without a gateway
// nothing is committed and the error's hidden cause (SendCause) names
// the setting to make.
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
	set := r.Service.settings()
	gateway := firstSet(t.Info[SMSIdentifier], r.Options.Str(SMSIdentifier), set.Value(SMSIdentifier))
	if gateway == "" {
		return nil, remoteNotSent(ErrSMSNotSent, fmt.Errorf("SMS token %s has no SMS gateway: set the system setting %s or the token's %s", t.Serial, SMSIdentifier, SMSIdentifier))
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
	validity := remoteSeconds(firstSet(r.Options.Str(SMSProviderTimeout), set.Value(SMSProviderTimeout)), defaultSMSValidity)
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
			n := svc.Notify()
			if n == nil {
				return remoteNotSent(ErrSMSNotSent, fmt.Errorf("SMS token %s: this server has no notification service to send through", t.Serial))
			}
			tags := tags
			tags.otp = value
			if err := n.SendSMS(ctx, gateway, phone, tags.replace(text)); err != nil {
				return remoteNotSent(ErrSMSNotSent, fmt.Errorf("SMS token %s, gateway %s: %w", t.Serial, gateway, err))
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
