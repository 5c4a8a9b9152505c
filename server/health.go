package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/store"
)

// Health probes answer bare JSON objects (no envelope), need no token and
// never block long: readiness reads the store with a short deadline.
const readyTimeout = 2 * time.Second

func (a *api) livez(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "OK"})
}

func (a *api) startupz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	if !a.s.Started() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not started"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "started"})
}

// readyz is ready when the server is started, the store answers, the
// enckey opens its canary, the store's writes work and no resolver is
// still loading its data (503 with "resolvers": "loading: <names>"), nor
// the token lists' set building at start ("tokens": "building the list
// set"). We have no HSM;
// "hsm" reports the key check. While the store refuses writes (a full
// disk) it answers 503 with "store" saying why, and is ready again once a
// write that needed new space succeeds (store/bolt probes for it). While
// the store's database (PostgreSQL) does not answer it answers 503 with
// "store": "database unreachable", and is ready again within a second of
// its return (authsrv.Server.Ready caches the ping for a second).
func (a *api) readyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !a.s.Started() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "hsm": "unchecked"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := a.s.Ready(ctx); err != nil {
		if errors.Is(err, authsrv.ErrStoreUnreachable) {
			// The store's database (PostgreSQL) does not answer; its
			// address and the cause go to the log, not to the probe.
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "hsm": "unchecked",
				"store": "database unreachable"})
			return
		}
		if we, ok := errors.AsType[*store.WriteError](err); ok {
			// The key opens its canary, but the store refuses writes.
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "hsm": "OK",
				"store": "store writes failing: " + we.Reason()})
			return
		}
		if le, ok := errors.AsType[*resolver.LoadingError](err); ok {
			// A passwd file still loading: lookups would wait for it.
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "hsm": "OK",
				"resolvers": "loading: " + strings.Join(le.Resolvers, ", ")})
			return
		}
		if errors.Is(err, authsrv.ErrWarmingUp) {
			// The token lists' set is still being built.
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "hsm": "OK",
				"tokens": "building the list set"})
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "hsm": "fail"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "hsm": "OK"})
}

// resolversz checks the connection of every LDAP and SQL resolver: 200
// {"status":"ready"} with each resolver "OK", or 503 {"status":"fail"}
// naming the failing ones; 503 {"status":"error"} when the check itself
// fails.
func (a *api) resolversz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ctx, cancel := context.WithTimeout(r.Context(), resolverszTimeout)
	defer cancel()
	health, err := a.s.Resolvers().Health(ctx)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "error"})
		return
	}
	body := map[string]any{}
	status, code := "ready", http.StatusOK
	for _, typ := range []string{"ldapresolver", "sqlresolver"} {
		m := map[string]string{}
		for name, ok := range health[typ] {
			m[name] = "OK"
			if !ok {
				m[name] = "fail"
				status, code = "fail", http.StatusServiceUnavailable
			}
		}
		body[typ] = m
	}
	body["status"] = status
	writeJSON(w, code, body)
}

// resolverszTimeout bounds the resolver checks of one probe.
const resolverszTimeout = 10 * time.Second
