// Package validate decides authentication requests: the /validate/check
// flow of privacyIDEA as a Go API. A request names a user (login, realm)
// or a token serial and carries a password made of PIN and OTP; the
// Validator finds the candidate tokens, splits the password per token,
// checks the OTP first and the PIN only of the token whose OTP matched (one
// key derivation for a success), triggers challenges for a PIN alone,
// checks challenge answers, and applies the fail counter rules.
//
// Around that core it applies the authentication and authorization
// policies of /validate: mangle, set_realm/setrealm, auth_cache,
// passOnNoUser/passOnNoToken, auth_max_fail/auth_max_success, last_auth,
// passthru (user store or RADIUS), force_challenge_response,
// application_tokentype, the post-checks serial/tokentype/tokeninfo,
// add_user_in_response, add_resolver_in_response, no_detail_on_*,
// preferred_client_mode, challenge text header and footer,
// authorized=deny_access and hide_specific_error_message. The policies
// come from one snapshot per request (one store read), so a request
// without policies costs nothing extra.
//
// Every request (Check, Trigger, Poll) writes its own audit entry from
// the typed caller it receives, in the transaction that commits its token
// changes where nothing after that commit can change the answer; the
// answer is typed (Response), and privacyIDEA's detail object is built by
// the HTTP layer. auth_max_fail and auth_max_success count the typed
// authentication records of the bucket authlog.
//
// Every refusal of check and triggerchallenge costs one key derivation at
// the configured KDF cost: where no PIN hash ran (an unknown user or
// serial, no token, a disabled or locked token, a token without PIN) a
// dummy one runs, so that timing does not tell the refusals apart.
//
// Package validate sits on floor 4: it imports token, realm, policy,
// resolver, user, audit, caller, store, apierr and internal/radclient (the
// answer codes of a RADIUS passthru), and nothing that knows HTTP.
package validate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// Messages of the decision, as privacyIDEA words them.
const (
	MsgMatching         = "matching %d tokens"
	MsgFoundChallenge   = "Found matching challenge"
	MsgResponseNoMatch  = "Response did not match the challenge."
	MsgResponseNoMatchN = "Response did not match for %d tokens."
	MsgWrongPIN         = "wrong otp pin"
	MsgNoTokens         = "The user has no tokens assigned"
	MsgNoSuitable       = "No suitable token found for authentication."
	MsgNoActiveCR       = "No active challenge response token found"
	MsgOTPOnlyFailed    = "OTP verification failed."
	MsgAuthCache        = "Authenticated by AuthCache."
	MsgAuthFailed       = "Authentication failed."
	DefaultChallenge    = "please enter otp: "
)

// Errors of the request.
var (
	ErrNoTarget       = apierr.New(apierr.Parameter, "You need to specify a serial, user or credential_id.")
	ErrInvalidSerial  = apierr.New(apierr.Parameter, "Invalid serial number.")
	ErrInvalidUser    = apierr.New(apierr.Parameter, "Invalid user.")
	ErrSerialNotUsers = apierr.New(apierr.Parameter, "Given serial does not belong to given user!")
	ErrAllRevoked     = apierr.New(apierr.TokenAdmin, "This action is not possible, since the token is locked").WithNumber(1007)
	// ErrAuthFailed replaces the unknown-user error under
	// hide_specific_error_message.
	ErrAuthFailed = apierr.New(apierr.Auth, MsgAuthFailed)
	// ErrNotAuthorized is authorized=deny_access.
	ErrNotAuthorized = apierr.New(apierr.Validate, "User is not authorized to authenticate under these conditions.")
	// ErrSerialNotAllowed and ErrTypeNotAllowed are the AUTHZ serial and
	// tokentype post-checks.
	ErrSerialNotAllowed = apierr.New(apierr.Policy, "Serial is not allowed for authentication!")
	ErrTypeNotAllowed   = apierr.New(apierr.Policy, "Tokentype not allowed for authentication!")
)

// Request is one authentication request.
type Request struct {
	// Caller is who asks (zero: a trusted local program); its action,
	// client, user agent and administrator go into the audit entry.
	Caller                caller.Caller
	User, Realm, Resolver string
	Serial                string
	Pass                  string
	// TransactionID answers a challenge (privacyIDEA's transaction_id or
	// state).
	TransactionID string
	// Type restricts the user's tokens to one type; it is honoured only
	// under the AUTHZ policy application_tokentype.
	Type string
	// OTPOnly checks only the OTP of the serial's token.
	OTPOnly bool
	// Options are the other request parameters (for token types).
	Options token.Params
	// CancelEnrollment cancels the optional enrollment via multichallenge
	// of TransactionID (cancel_enrollment).
	CancelEnrollment bool
	// RaiseSendError turns a challenge that could not be sent into an
	// error (privacyIDEA's exception=1) instead of a rejection.
	RaiseSendError bool
	// SAMLAttributes asks for the user's attributes in the answer, as
	// /validate/samlcheck sends them (Response.SAMLAttributes).
	SAMLAttributes bool
	// Policies, when set, is the policy snapshot the caller already took
	// for this request: the decision uses it instead of reading its own,
	// so a caller that also needs policies pays one store read.
	Policies *policy.Snapshot
	// PriorPolicies name the policies the caller already applied to this
	// request (api_key_required, the admin right of triggerchallenge):
	// the audit entry lists them with those of the decision.
	PriorPolicies []string
}

// String describes the request without its password.
func (r Request) String() string {
	return fmt.Sprintf("Request(user=%q realm=%q serial=%q pass=<%d chars>)", r.User, r.Realm, r.Serial, len(r.Pass))
}

// Response is the decision.
type Response struct {
	Value bool
	// Message is the decision's message ("matching 1 tokens", "wrong otp
	// pin", the joined challenge texts, ...).
	Message string
	// Serial, Type and OTPLen name the token that decided, when the
	// answer names one ("" and HasOTPLen false otherwise).
	Serial, Type string
	OTPLen       int
	HasOTPLen    bool
	// NextPINChange is the token's next_pin_change after a success ("" for
	// none); PINChange tells whether the change is due.
	NextPINChange string
	PINChange     bool
	// TransactionID and TransactionIDs are the challenges' transaction;
	// Messages their texts, Challenges the challenges themselves.
	TransactionID  string
	TransactionIDs []string
	Messages       []string
	Challenges     []Challenge
	// ClientMode, Attributes, Image and Link are those of the last
	// challenge; PreferredClientMode is the mode the client should show.
	ClientMode          string
	PreferredClientMode string
	Attributes          map[string]any
	Image, Link         string
	// Enrollment marks the challenge of an enrollment via multichallenge,
	// EnrollmentOptional one the user may cancel.
	Enrollment, EnrollmentOptional bool
	// UserAttributes are the user's attributes under add_user_in_response
	// (nil when not asked for); AddResolver asks for the user's resolver
	// and realm in the answer (add_resolver_in_response).
	UserAttributes map[string]any
	AddResolver    bool
	// NoDetail is set when no_detail_on_success or no_detail_on_fail
	// leaves the details out of the answer.
	NoDetail bool
	// ChallengeStatus is the state of a polled transaction ("accept" or
	// "pending").
	ChallengeStatus string
	// User is the resolved user (Found() false on the serial path without
	// owner or for an unknown user).
	User user.User
	// Challenge is set when challenges were triggered.
	Challenge bool
	// SendFailed is set when a challenge could not be delivered.
	SendFailed bool
	// Policies are the names of the policies that decided (for the
	// audit).
	Policies []string
	// AuthItems are the authentication items of the token that decided
	// a success (privacyIDEA's top-level "auth_items": {"offline":
	// [...]}); nil for none.
	AuthItems map[string]any
	// SAMLAttributes are the user's attributes when the request asked for
	// them (Request.SAMLAttributes) on the user path: empty unless the
	// system setting ReturnSamlAttributes (default on) holds and the
	// check succeeded or ReturnSamlAttributesOnFail (default off) holds;
	// nil when not asked.
	SAMLAttributes map[string]any
}

// Challenge is one challenge of a multi-challenge answer.
type Challenge struct {
	TransactionID, Serial, Type, ClientMode, Message string
	// Image and Link are the QR code and otpauth URL of a token enrolled
	// via multichallenge.
	Image, Link string
	Attributes  map[string]any
}

// Config wires the validator.
type Config struct {
	Tokens   *token.Service
	Realms   *realm.Service
	Policies *policy.Service
	// Resolvers gives the owner's user store on the serial path (otppin
	// userstore checks the PIN part as the owner's password).
	Resolvers *resolver.Service
	Now       func() time.Time
	// Store holds the auth cache (bucket "authcache"); without it the
	// auth_cache policy has no effect.
	Store store.Store
	// CacheKey keys the hashes of cached passwords (32 bytes; derive it
	// from the server's key so that the cache survives restarts and is
	// shared by nodes). Without it a random key is made, and the cache
	// lives as long as the Validator.
	CacheKey []byte
	// Audit receives the entry of every request; without it nothing is
	// audited.
	Audit *audit.Log
	// NodeName names this node in the audit entries.
	NodeName string
	// Events, when set, runs around every operation (the event
	// handlers).
	Events EventHook
	// Attrs are the custom user attributes that policy conditions on
	// user attributes read besides the user store's (none without).
	Attrs *user.Attributes
	// AuthItems, when set, gives the authentication items of the token
	// of a successful check (the offline application's values).
	AuthItems AuthItemsFunc
}

// Validator decides authentication requests.
type Validator struct {
	cfg      Config
	cacheKey []byte
	// seq numbers the audit entries' thread ids.
	seq atomic.Int64

	// sweepMu guards sweepAt, where the next auth cache sweep starts.
	sweepMu sync.Mutex
	sweepAt []byte
}

// New returns a Validator.
func New(cfg Config) *Validator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Validator{cfg: cfg, cacheKey: cacheKey(cfg.CacheKey)}
}

// splitAtSign reports whether "login@realm" is split (the system
// setting splitAtSign, on unless the token settings turn it off).
func (v *Validator) splitAtSign() bool {
	return v.cfg.Tokens == nil || !v.cfg.Tokens.Settings().NoSplitAtSign
}

// MsgMatching1 is the success message of one token.
func MsgMatching1() string { return fmt.Sprintf(MsgMatching, 1) }

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// setToken sets the message and names the token t (serial, type and OTP
// length) in the answer.
func (res *Response) setToken(msg string, t *token.Token) {
	res.Message, res.Serial, res.Type, res.OTPLen, res.HasOTPLen = msg, t.Serial, t.Type, t.OTPLen, true
}

// tokenAnswer is an answer with msg that names t.
func tokenAnswer(u user.User, msg string, t *token.Token) Response {
	res := Response{User: u}
	res.setToken(msg, t)
	return res
}

// userAttrs are u's custom attributes (none without Config.Attrs).
func (v *Validator) userAttrs(ctx context.Context, u user.User) (map[string]string, error) {
	if v.cfg.Attrs == nil {
		return nil, nil
	}
	return v.cfg.Attrs.Get(ctx, u)
}
