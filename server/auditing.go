package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
)

// audit writes the request's entry: the method and path, the caller, the
// target user, realm, resolver and serial from the parameters (never a
// password, PIN, OTP or token), the outcome and the deciding policies. An
// error from it turns the answer into an error.
func (a *api) audit(c *call, ans answer, err error) error {
	if c.recorded {
		// Written with the change it records (a /validate success).
		return nil
	}
	// Neither the client's departure, a failed body read (which cancels
	// the request's context) nor the request's deadline may lose it.
	_, werr := a.s.Audit().Write(context.WithoutCancel(c.ctx), a.auditEntry(c, ans, err))
	if werr == nil || !errors.Is(werr, store.ErrWriteFailed) {
		return werr
	}
	// The store refuses writes (a full disk). A request that changed
	// nothing, a refusal or a read, still gets its answer; the audit log
	// counts the lost entry (audit.Log.Unwritten) and the store's failure
	// is logged once, when it begins.
	if err != nil || c.r.Method == http.MethodGet {
		zerolog.Ctx(c.ctx).Debug().Err(werr).Msg("answered without its audit entry")
		return nil
	}
	return werr
}

// auditEntry is the audit entry of call c with its answer or error.
func (a *api) auditEntry(c *call, ans answer, err error) audit.Entry {
	e := c.entry
	end := a.s.Now()
	e.StartDate, e.Date = c.started.UTC(), end.UTC()
	e.Duration = end.Sub(c.started).Seconds()
	e.Action = c.r.Method + " " + audit.Text(c.r.URL.Path, 256)
	e.Client = clientIP(c.r).String()
	name, version := audit.SplitAgent(c.r.UserAgent())
	e.UserAgent, e.UserAgentVersion = audit.Text(name, 64), audit.Text(version, 64)
	e.Node = a.s.NodeName()
	e.ThreadID = strconv.FormatInt(a.seq.Add(1), 10)
	if c.who != nil {
		if c.who.Role == roleAdmin {
			e.Administrator = c.who.Username
		} else if e.User == "" {
			e.User, e.Realm = c.who.Username, c.who.Realm
		}
	}
	if c.p != nil {
		fill := func(dst *string, keys ...string) {
			if *dst != "" {
				return
			}
			for _, k := range keys {
				if v, err := c.p.str(k); err == nil && v != "" {
					*dst = audit.Text(v, 256)
					return
				}
			}
		}
		fill(&e.User, "user", "username")
		fill(&e.Realm, "realm")
		fill(&e.Resolver, "resolver", "resolvername")
		fill(&e.Serial, "serial")
		fill(&e.TokenType, "type")
	}
	if len(c.policies) > 0 {
		ps := slices.Clone(c.policies)
		slices.Sort(ps)
		e.Policies = strings.Join(slices.Compact(ps), ",")
	}
	switch {
	case err != nil:
		e.Success = false
		_, _, msg, _, internal := apierr.Wire(err)
		if e.Info == "" && !internal {
			e.Info = audit.Text(msg, 512)
		}
	case ans.auth:
		e.Authentication = authentication(ans.value, ans.detail)
		e.Success = e.Authentication == "ACCEPT"
	default:
		e.Success = true
	}
	return e
}
