package validate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// AUTH client_mode_per_user: after a success with a token, the token type
// is remembered for the user and the client application (the product name
// of the User-Agent, e.g. "privacyidea-cp" of "privacyidea-cp/2.0 …").
// A later challenge of that user from that application prefers the
// client_mode of the challenge of that type, when there is one, over the
// preferred_client_mode list.
//
// The bucket "clientmode" holds one record per user (realm, resolver,
// uid) with at most maxModeAgents applications, the most recently changed
// first; a record is written only when the type of an application
// changes.
const (
	modeBucket    = "clientmode"
	modeSchema    = 1
	maxModeAgents = 8
	maxAgentLen   = 64
)

type modeRecord struct {
	store.Versioned
	Agents []agentMode `json:"agents"`
}

// agentMode is the token type last used from one client application.
type agentMode struct {
	Agent string    `json:"agent"`
	Type  string    `json:"type"`
	At    time.Time `json:"at"`
}

func modeKey(u user.User) []byte {
	return []byte(strings.ToLower(u.Realm) + "\x00" + u.Resolver + "\x00" + u.UID)
}

// agentName is the product name of a User-Agent, lower case and bounded.
func agentName(ua string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(ua), " ")
	name, _, _ := strings.Cut(first, "/")
	name = strings.ToLower(strings.ToValidUTF8(name, ""))
	for len(name) > maxAgentLen {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// clientModes is AUTH client_mode_per_user for one request: it remembers
// the token type the user authenticated with from the request's client
// application, and prefers the client mode of that type's challenge.
type clientModes struct {
	v   *Validator
	r   *Request
	t   *target
	pol *policies
}

// on returns the name of the client_mode_per_user policy of the
// request's user, or "" when it is not set or cannot apply.
func (m *clientModes) on(ctx context.Context) (string, error) {
	if m.v.cfg.Store == nil || !m.t.found || m.t.u.UID == "" {
		return "", nil
	}
	return m.pol.flag(ctx, policy.ScopeAuthentication, "client_mode_per_user")
}

// remember stores typ as the last used token type of the user
// from the request's client application.
func (m *clientModes) remember(ctx context.Context, typ string) error {
	if typ == "" || typ == "undetermined" {
		return nil
	}
	name, err := m.on(ctx)
	if err != nil || name == "" {
		return err
	}
	m.pol.note(name)
	agent, key := agentName(m.r.Caller.UserAgent), modeKey(m.t.u)
	if last, err := m.last(ctx); err != nil || last == typ {
		return err
	}
	now := m.v.cfg.Now().UTC()
	return m.v.cfg.Store.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(modeBucket)
		var rec modeRecord
		if err := store.GetJSON(b, key, &rec); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		agents := slices.DeleteFunc(slices.Clone(rec.Agents), func(a agentMode) bool { return a.Agent == agent })
		agents = append([]agentMode{{Agent: agent, Type: typ, At: now}}, agents...)
		if len(agents) > maxModeAgents {
			agents = agents[:maxModeAgents]
		}
		return store.PutJSON(b, key, modeRecord{Versioned: store.Versioned{Schema: modeSchema}, Agents: agents})
	})
}

// last is the token type the user last used from the request's
// client application ("" when none is known).
func (m *clientModes) last(ctx context.Context) (string, error) {
	agent, key := agentName(m.r.Caller.UserAgent), modeKey(m.t.u)
	typ := ""
	err := m.v.cfg.Store.View(ctx, func(tx store.Tx) error {
		typ = ""
		var rec modeRecord
		if err := store.GetJSON(tx.Bucket(modeBucket), key, &rec); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		}
		for _, a := range rec.Agents {
			if a.Agent == agent {
				typ = a.Type
				break
			}
		}
		return nil
	})
	return typ, err
}

// prefer is the client_mode that client_mode_per_user prefers
// among the challenges multi: that of the challenge of the type the user
// last used from this application, or "".
func (m *clientModes) prefer(ctx context.Context, multi []Challenge) (string, error) {
	name, err := m.on(ctx)
	if err != nil || name == "" {
		return "", err
	}
	typ, err := m.last(ctx)
	if err != nil || typ == "" {
		return "", err
	}
	for _, c := range multi {
		if c.Type == typ {
			if mode := c.ClientMode; mode != "" {
				m.pol.note(name)
				return mode, nil
			}
		}
	}
	return "", nil
}
