package token

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// Type is a token type. Implementations are stateless; everything they
// keep lives in the Token (fields, Info, sealed secrets).
type Type interface {
	// Name is the lower-case type name ("hotp").
	Name() string
	// Prefix is the serial prefix of generated serials ("OATH").
	Prefix() string
	// Enroll applies the enrollment parameters to e.Token (a new token or
	// one being re-initialised) and fills e.Detail. It must not write to
	// the store; Service.Init persists the result.
	Enroll(ctx context.Context, e *Enroll) error
	// Check verifies the OTP part of a password against a snapshot of the
	// token. It returns a Match whose Apply re-checks and advances the
	// stored state inside the commit transaction. A wrong OTP is
	// Match{OK: false} with a nil error.
	Check(ctx context.Context, c *Check) (Match, error)
}

// Challenger is implemented by types that answer a correct PIN with a
// challenge (e-mail, SMS, indexedsecret, questionnaire, hotp/totp with the
// challenge_response policy).
type Challenger interface {
	// Challenge prepares a challenge for the token: the message, the data
	// to remember and, when the type must send something (e-mail, SMS), a
	// function that does it after the state was committed. Prepare is
	// called outside transactions; Apply (may be nil) changes the token in
	// the commit transaction (e.g. advancing the counter whose OTP is
	// sent).
	Challenge(ctx context.Context, c *ChallengeRequest) (*ChallengeResult, error)
}

// PINOnly is implemented by types whose whole password is the PIN (spass).
type PINOnly interface{ PINOnly() bool }

// PINChallenger is implemented by types that answer a correct PIN alone
// with a challenge without a challenge_response policy, and word its text
// themselves (e-mail, SMS, indexedsecret, questionnaire).
type PINChallenger interface{ ChallengesOnPIN() bool }

// NeverChallenger is implemented by types that have no challenge at all,
// so that neither a PIN nor triggerchallenge makes one (spass, sshkey,
// radius, applspec).
type NeverChallenger interface{ NeverChallenges() bool }

// RemoteChecker is implemented by types whose check forwards the value to
// another server (radius), so that autoassignment never asks them.
type RemoteChecker interface{ ChecksRemotely() bool }

// AuthEnroller is implemented by types that enroll_via_multichallenge can
// enroll during an authentication; EnrollVia says how the user receives
// the new token.
type AuthEnroller interface{ EnrollVia() EnrollVia }

// Channels through which a token enrolled during an authentication sends
// its first challenge.
const (
	ChannelEmail = "email"
	ChannelSMS   = "sms"
)

// EnrollVia is how a token enrolled during an authentication reaches its
// user: QR shows the otpauth URL as a QR code; otherwise Channel
// (ChannelEmail, ChannelSMS) sends the first challenge to the address the
// user store holds.
type EnrollVia struct {
	QR      bool
	Channel string
}

// Params are enrollment or request parameters (all strings).
type Params map[string]string

// Get returns the value of key and whether it was given.
func (p Params) Get(key string) (string, bool) { v, ok := p[key]; return v, ok }

// Str returns the value of key or "".
func (p Params) Str(key string) string { return p[key] }

// Has reports whether key was given.
func (p Params) Has(key string) bool { _, ok := p[key]; return ok }

// Bool reads a privacyIDEA boolean (1, true, yes, on; case-insensitive).
func (p Params) Bool(key string) bool { return IsTrue(p[key]) }

// IsTrue reads privacyIDEA's truthy strings.
func IsTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on", "t", "y":
		return true
	}
	return false
}

// Enroll is what a type's Enroll sees and fills.
type Enroll struct {
	// Token is the token being enrolled; its Serial, Type, defaults and
	// Info are set. For a re-initialisation it holds the stored state.
	Token *Token
	// New is false when an existing token of the same type is
	// re-initialised.
	New bool
	// Params are the request parameters, with enrollment policy values
	// already injected by the caller.
	Params Params
	// Owner is the user the token is enrolled for, if any, and OwnerInfo
	// the user store attributes (email, mobile, …).
	Owner     *user.User
	OwnerInfo map[string]string
	Now       time.Time
	Rand      io.Reader
	// Service gives access to secrets and the notification channels.
	Service *Service

	// Key, when set, becomes the sealed seed ("otpkey").
	Key []byte
	// Secrets are other sealed values by field name; a nil value deletes
	// the field.
	Secrets map[string][]byte
	// Detail is the type-specific init detail of the response.
	Detail map[string]any
	// KeepPIN tells Init not to set the PIN from the "pin" parameter (spass
	// handles its PIN itself).
	KeepPIN bool
	// NoImages leaves the QR code images out of Detail: an import discards
	// the detail, and drawing them costs more than the rest of a token.
	NoImages bool

	// imagesOf, when not nil, are the detail entries whose images the
	// caller shows (InitRequest.ImagesOf).
	imagesOf []string
	// images are the QR codes Init draws into Detail once the token is
	// committed.
	images []pendingImage
}

// SetSecret records a sealed field to write.
func (e *Enroll) SetSecret(field string, v []byte) {
	if e.Secrets == nil {
		e.Secrets = map[string][]byte{}
	}
	e.Secrets[field] = v
}

// Check is what a type's Check sees.
type Check struct {
	Token *Token
	// OTP is the part of the password after the PIN (the whole password
	// for types without a PIN split).
	OTP string
	// Options are request values some types read (e.g. the indexedsecret
	// positions of a challenge, the transaction id).
	Options Params
	// Challenge is the stored challenge being answered, if any.
	Challenge *Challenge
	Now       time.Time
	Service   *Service
}

// Key opens the token's seed.
func (c *Check) Key() ([]byte, error) { return c.Service.Secret(c.Token, FieldKey) }

// Match is the outcome of a type's Check.
type Match struct {
	// OK is true when the OTP matched.
	OK bool
	// Counter is the matched counter or time step (-1 when the type has
	// none).
	Counter int64
	// Apply re-checks the match on the freshly read token inside the
	// commit transaction and advances its state. It returns false when the
	// match is no longer valid (the OTP was used meanwhile). It must only
	// change the token it is given. Nil means nothing to advance.
	Apply func(t *Token) bool
	// Delete removes the token after a successful use (registration).
	Delete bool
	// Rollout marks the first OTP of a token in rollout state clientwait
	// (enrolled during an authentication): the commit makes it enrolled.
	// Token types never set it; the caller does for the answer to the
	// enrollment challenge.
	Rollout bool
	// Also, when set, runs in the commit transaction after the token was
	// written (or deleted), with the committed token: the caller's record
	// of the success (its audit entry) commits with it or not at all. Like
	// Apply it may run more than once.
	Also func(tx store.Tx, t *Token) error
	// Message replaces the failure message (e.g. "previous otp used
	// again").
	Message string
	// Hashed is set when the check ran a key derivation (a type whose OTP
	// is a hashed password), so that the caller's rejection does not run
	// a dummy one besides it.
	Hashed bool
	// Remember, on a failed match, changes the token in the transaction
	// that records the failure when the PIN was right (AutoResync's first
	// value). It must only change the token it is given.
	Remember func(t *Token)
}

// ChallengeRequest is what a Challenger sees.
type ChallengeRequest struct {
	Token *Token
	// TransactionID is the shared id of this request's challenges.
	TransactionID string
	// State is the transaction id passed in by the client, if any.
	State   string
	Options Params
	// OwnerInfo holds the owner's user store attributes when known.
	OwnerInfo map[string]string
	Now       time.Time
	Service   *Service
}

// ChallengeResult is a prepared challenge.
type ChallengeResult struct {
	Message    string
	ClientMode string
	// Challenge is the challenge text stored with it (e.g. the positions
	// asked for); Data is sealed in the challenge store.
	Challenge string
	Data      []byte
	Validity  time.Duration
	// Attributes are extra per-challenge response attributes.
	Attributes map[string]any
	// Apply changes the token in the transaction that stores the
	// challenge (may be nil); it must only change the token it is given.
	Apply func(t *Token)
	// Send delivers the challenge after the commit (e-mail, SMS); the
	// token passed is the committed state. Nil when nothing is sent.
	Send func(ctx context.Context, t *Token) error
}

// Registry holds the token types by name.
type Registry struct {
	mu    sync.RWMutex
	types map[string]Type
}

// NewRegistry returns a registry with the given types.
func NewRegistry(types ...Type) *Registry {
	r := &Registry{types: map[string]Type{}}
	for _, t := range types {
		r.types[strings.ToLower(t.Name())] = t
	}
	return r
}

// Register adds or replaces a type.
func (r *Registry) Register(t Type) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types[strings.ToLower(t.Name())] = t
}

// Get returns the type by (case-insensitive) name.
func (r *Registry) Get(name string) (Type, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[strings.ToLower(name)]
	return t, ok
}

// Names lists the registered type names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.types))
}

// String describes the registry.
func (r *Registry) String() string { return fmt.Sprintf("token types %v", r.Names()) }
