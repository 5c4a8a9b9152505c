package token

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// Migrated is a token adopted from another authentication server, with
// the state it has there: its secrets (in Params, as the type's
// enrollment takes them), the PIN hash kept as it is, the counters and
// the state. Params and PINHash hold secrets, so a Migrated must never be
// logged or encoded into a response; String redacts them.
type Migrated struct {
	Serial      string
	Type        string // lower-case authsrv type name
	Description string
	// OTPLen is the token's length, 0 for the type's default.
	OTPLen int
	// Params are the type's enrollment parameters that carry its secrets
	// and settings, as /token/init takes them (otpkey, motppin, sshkey,
	// questions, hashlib, timeStep, email, ...). Types that implement
	// Adopter read parameters that no enrollment takes: the tan type reads
	// its unused TANs from "tan.tan<N>" entries "<salt text>:<hex
	// SHA-256 of the TAN followed by the salt text>".
	Params Params
	// PINHash is the PIN as a PHC string (argon2), kept as it is so that
	// the users keep their PINs; "" for no PIN.
	PINHash string
	// Count is the counter in this package's meaning: the next HOTP
	// counter, the last used time step (totp, motp) or YubiKey counter.
	Count                   uint64
	CountWindow, SyncWindow int // 0 keeps the defaults
	FailCount, MaxFail      int // MaxFail 0 keeps the default
	Active, Revoked, Locked bool
	// RolloutState is "" (or enrolled) for a usable token, else one of the
	// package's rollout states.
	RolloutState string
	// Info is tokeninfo carried over (count_auth, last_auth, free
	// entries, ...). It is applied after the type's enrollment and never
	// replaces what the type derived from Params, except the record of
	// when and how the token was made (creation_date, tokenkind).
	Info map[string]string
	// Owner, when set, assigns the token; it must be a resolved user
	// (UID, Resolver, Realm and Login).
	Owner *user.User
	// Realms are the token realms (the owner's realm is always added).
	Realms []string
}

// String redacts the parameters' values and the PIN hash.
func (m Migrated) String() string {
	keys := slices.Sorted(maps.Keys(m.Params))
	owner := ""
	if m.Owner != nil {
		owner = m.Owner.Login + "@" + m.Owner.Realm
	}
	return fmt.Sprintf("{Serial:%s Type:%s Params:%v[values redacted] PINHash:[%d bytes redacted] Count:%d Active:%t Revoked:%t Locked:%t Owner:%s Realms:%v}",
		m.Serial, m.Type, keys, len(m.PINHash), m.Count, m.Active, m.Revoked, m.Locked, owner, m.Realms)
}

// GoString redacts %#v as String does.
func (m Migrated) GoString() string { return "token.Migrated" + m.String() }

// Adopter is implemented by types whose adopted tokens carry state that
// no enrollment parameter expresses (the hashed unused TANs of a tan
// token, the registration code that enrollment always generates). Adopt
// replaces Enroll for a Migrated record; it sees the record's Params.
type Adopter interface {
	Adopt(ctx context.Context, e *Enroll) error
}

// migratedInfoWins are the carried tokeninfo keys that replace what the
// enrollment set: they record the token's history, not its secrets.
var migratedInfoWins = []string{InfoCreationDate, InfoTokenKind}

// ImportMigrated writes adopted tokens in one transaction with also (the
// caller's audit entry) and returns how many it wrote and the records it
// refused (an existing serial, an unknown type, data the type refuses).
func (s *Service) ImportMigrated(ctx context.Context, recs []Migrated, also ...func(store.Tx) error) (int, []ImportFailure) {
	b := s.PrepareMigrated(ctx, recs)
	if err := s.CommitImport(ctx, b, also...); err != nil {
		return 0, importFailed(b, err)
	}
	return len(b.items), b.Failed
}

// PrepareMigrated is the part of ImportMigrated that needs no
// transaction: the batch CommitImport writes. No QR code is drawn and no
// event runs; the type's enrollment (or adoption) checks each record.
func (s *Service) PrepareMigrated(ctx context.Context, recs []Migrated) *ImportBatch {
	b := &ImportBatch{}
	for _, m := range recs {
		if err := s.prepareMigrated(ctx, b, m); err != nil {
			reason := "the token could not be created"
			if e, ok := errors.AsType[*apierr.Error](err); ok {
				reason = e.Error()
			}
			b.Failed = append(b.Failed, ImportFailure{m.Serial, reason})
		}
	}
	return b
}

// errMigrated is the refusal of a record.
func errMigrated(format string, args ...any) *apierr.Error {
	return apierr.New(apierr.TokenImport, fmt.Sprintf(format, args...))
}

func (s *Service) prepareMigrated(ctx context.Context, b *ImportBatch, m Migrated) error {
	if !ValidSerial(m.Serial) {
		return errMigrated("invalid serial")
	}
	if ok, err := s.stored(ctx, m.Serial); err != nil {
		return errMigrated("the token store failed")
	} else if ok {
		return errImportExists
	}
	typName := strings.ToLower(strings.TrimSpace(m.Type))
	if _, ok := s.cfg.Types.Get(typName); !ok || typName == "" {
		return errMigrated("token type %q is not known", m.Type)
	}
	if m.PINHash != "" {
		if _, err := secret.ParsePHC(m.PINHash); err != nil {
			return errMigrated("the PIN hash is not a PHC string this server verifies")
		}
	}
	if m.CountWindow < 0 || m.SyncWindow < 0 || m.FailCount < 0 || m.MaxFail < 0 || m.OTPLen < 0 {
		return errMigrated("a negative counter or window")
	}
	switch m.RolloutState {
	case "", StateEnrolled, StateClientWait, StateVerify, StateBroken:
	default:
		return errMigrated("rollout state %q is not known", m.RolloutState)
	}
	if m.Owner != nil && (m.Owner.UID == "" || m.Owner.Login == "" || m.Owner.Realm == "" || m.Owner.Resolver == "") {
		return errMigrated("the owner is not a resolved user")
	}
	p := Params{}
	for k, v := range m.Params {
		if k == "pin" || k == "genkey" || k == "2stepinit" || k == "verify" {
			continue // the PIN is the hash; nothing is generated or verified
		}
		p[k] = v
	}
	p["description"] = m.Description
	if m.OTPLen > 0 {
		p["otplen"] = strconv.Itoa(m.OTPLen)
	}
	kind := m.Info[InfoTokenKind]
	req := InitRequest{Type: typName, Serial: m.Serial, Params: p, Owner: m.Owner, Realms: m.Realms, Kind: kind, NoImages: true, adopt: true}
	pr, err := b.prepareNew(ctx, s, req)
	if err != nil {
		return err
	}
	t := pr.t
	t.Count = m.Count
	if m.CountWindow > 0 {
		t.CountWindow = m.CountWindow
	}
	if m.SyncWindow > 0 {
		t.SyncWindow = m.SyncWindow
	}
	if m.MaxFail > 0 {
		t.MaxFail = m.MaxFail
	}
	t.FailCount = m.FailCount
	t.Active, t.Revoked, t.Locked = m.Active, m.Revoked, m.Locked
	if m.RolloutState != "" {
		t.RolloutState = m.RolloutState
	}
	t.PIN, t.PINSealed = m.PINHash, nil
	for k, v := range m.Info {
		if _, derived := t.Info[k]; derived && !slices.Contains(migratedInfoWins, k) {
			continue
		}
		if len(v) > maxInfoValueLen {
			return errMigrated("the tokeninfo %s is too long", k)
		}
		t.SetInfo(k, v)
	}
	if len(t.Info) > maxInfoKeys {
		return errMigrated("too many tokeninfo entries")
	}
	b.items = append(b.items, pr)
	return nil
}
