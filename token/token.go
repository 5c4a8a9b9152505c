package token

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// Rollout states.
const (
	StateEnrolled   = "enrolled"
	StateClientWait = "clientwait"
	StateVerify     = "verify"
	StateBroken     = "broken"
)

// Tokeninfo keys the package itself maintains.
const (
	InfoCreationDate       = "creation_date"
	InfoTokenKind          = "tokenkind"
	InfoHashlib            = "hashlib"
	InfoCountAuth          = "count_auth"
	InfoCountAuthSuccess   = "count_auth_success"
	InfoCountAuthMax       = "count_auth_max"
	InfoCountAuthSuccMax   = "count_auth_success_max"
	InfoValidityStart      = "validity_period_start"
	InfoValidityEnd        = "validity_period_end"
	InfoFailcounterExceed  = "failcounter_exceeded"
	InfoLastAuth           = "last_auth"
	InfoTimeStep           = "timeStep"
	InfoTimeWindow         = "timeWindow"
	InfoTimeShift          = "timeShift"
	InfoNextPinChange      = "next_pin_change"
	KindSoftware           = "software"
	KindHardware           = "hardware"
	validityLayout         = "2006-01-02T15:04-0700"
	creationLayout         = "2006-01-02T15:04:05-07:00"
	failcounterTimeLayout  = validityLayout
	maxInfoKeys            = 200
	maxInfoValueLen        = 64 << 10
	maxDescriptionLen      = 512
	maxSerialLen           = 64
	maxRealmsPerToken      = 100
	defaultSerialRandomLen = 4
)

var serialRe = regexp.MustCompile(`^[0-9a-zA-Z\-_]+$`)

// ValidSerial reports whether s is a syntactically valid serial.
func ValidSerial(s string) bool { return len(s) <= maxSerialLen && serialRe.MatchString(s) }

// Token is one token as stored. The seed and other secrets are sealed in
// Sealed (field name -> ciphertext); PIN is a PHC hash or "" for an empty
// PIN.
type Token struct {
	ID           uint64            `json:"id"`
	Serial       string            `json:"serial"`
	Type         string            `json:"type"`
	Description  string            `json:"description"`
	Active       bool              `json:"active"`
	Revoked      bool              `json:"revoked"`
	Locked       bool              `json:"locked"`
	RolloutState string            `json:"rollout_state"`
	OTPLen       int               `json:"otplen"`
	Count        uint64            `json:"count"`
	CountWindow  int               `json:"count_window"`
	SyncWindow   int               `json:"sync_window"`
	FailCount    int               `json:"failcount"`
	MaxFail      int               `json:"maxfail"`
	Info         map[string]string `json:"info"`
	Realms       []string          `json:"realms"`
	Owner        *user.User        `json:"owner,omitempty"`
	PIN          string            `json:"pin,omitempty"`
	PINSealed    []byte            `json:"pin_sealed,omitempty"`
	Sealed       map[string][]byte `json:"sealed,omitempty"`
}

type record struct {
	store.Versioned
	Token
}

const schema = 1

// Clone returns a deep copy of t.
func (t *Token) Clone() *Token {
	c := *t
	c.Info = maps.Clone(t.Info)
	if c.Info == nil {
		c.Info = map[string]string{}
	}
	c.Realms = slices.Clone(t.Realms)
	if t.Owner != nil {
		o := *t.Owner
		c.Owner = &o
	}
	c.PINSealed = slices.Clone(t.PINSealed)
	c.Sealed = maps.Clone(t.Sealed)
	return &c
}

// Assigned reports whether the token has an owner.
func (t *Token) Assigned() bool { return t.Owner != nil && t.Owner.UID != "" }

// PINHashed reports whether checking t's PIN runs a key derivation (the
// PIN is a hash, not empty or encrypted), so a caller can tell whether its
// rejection already cost one.
func (t *Token) PINHashed() bool { return t.PIN != "" && len(t.PINSealed) == 0 }

// InfoInt reads an integer tokeninfo value, def when missing or malformed.
func (t *Token) InfoInt(key string, def int) int {
	v, ok := t.Info[key]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			return def
		}
		return int(f)
	}
	return n
}

// SetInfo sets a tokeninfo value ("" keeps an empty value).
func (t *Token) SetInfo(key, value string) {
	if t.Info == nil {
		t.Info = map[string]string{}
	}
	t.Info[key] = value
}

// incInfo adds one to an integer tokeninfo counter.
func (t *Token) incInfo(key string) {
	t.SetInfo(key, strconv.Itoa(t.InfoInt(key, 0)+1))
}

// FormatValidity renders a validity or failcounter time as privacyIDEA
// does: YYYY-MM-DDThh:mm+zzzz.
func FormatValidity(tm time.Time) string { return tm.Format(validityLayout) }

// ParseValidity reads a validity period bound. privacyIDEA accepts
// "YYYY-MM-DDThh:mm+zzzz" and, from older versions, "DD/MM/YY HH:MM"; both
// are read, and an ISO-8601 date with seconds too.
func ParseValidity(s string) (time.Time, error) {
	for _, layout := range []string{validityLayout, "2006-01-02T15:04:05-0700", time.RFC3339, "2006-01-02T15:04Z07:00", "02/01/06 15:04", "2006-01-02 15:04", "2006-01-02"} {
		if tm, err := time.Parse(layout, s); err == nil {
			return tm, nil
		}
	}
	return time.Time{}, errBadDate(s)
}

// InValidity reports whether now lies inside the token's validity period
// (missing bounds do not restrict; unparsable ones fail closed).
func (t *Token) InValidity(now time.Time) bool {
	if s := t.Info[InfoValidityStart]; s != "" {
		st, err := ParseValidity(s)
		if err != nil || now.Before(st) {
			return false
		}
	}
	if s := t.Info[InfoValidityEnd]; s != "" {
		end, err := ParseValidity(s)
		if err != nil || now.After(end) {
			return false
		}
	}
	return true
}

// AuthCountExceeded reports whether count_auth_max or
// count_auth_success_max is reached.
func (t *Token) AuthCountExceeded() bool {
	if m := t.InfoInt(InfoCountAuthMax, 0); m > 0 && t.InfoInt(InfoCountAuth, 0) >= m {
		return true
	}
	if m := t.InfoInt(InfoCountAuthSuccMax, 0); m > 0 && t.InfoInt(InfoCountAuthSuccess, 0) >= m {
		return true
	}
	return false
}
