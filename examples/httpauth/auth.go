package main

import (
	"context"
	"crypto/rand"
	"errors"
	"html/template"
	"log"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/validate"
)

// Paths the middleware answers itself, and its cookies.
const (
	loginPath       = "/login"
	logoutPath      = "/logout"
	sessionCookie   = "httpauth_session"
	challengeCookie = "httpauth_challenge"
	// maxAnswers is how many OTPs one challenge may be answered with.
	maxAnswers = 3
)

// Auth is a net/http middleware that lets through only users who
// authenticated with PIN+OTP at the authsrv library: with HTTP Basic (the
// password is PIN and OTP) or with the login form at /login, whose second
// step answers a challenge (an e-mail token's OTP). Every check goes
// through Validator.Check with the browser's address and the
// middleware's user agent as caller, so authsrv's policies, audit, event
// handlers and client applications apply. A success opens a session
// kept in memory, so the OTP is not asked at every request.
type Auth struct {
	v *validate.Validator
	// Realm is the realm of the users ("" for the default realm).
	Realm string
	// UserAgent names the middleware to authsrv (client applications,
	// user agent policy conditions).
	UserAgent string
	// SessionTTL is how long a login lasts, ChallengeTTL how long the
	// second step of the form may wait.
	SessionTTL, ChallengeTTL time.Duration
	// Log receives internal errors (nil: silent). It never sees a PIN
	// or OTP.
	Log *log.Logger

	mu       sync.Mutex
	sessions map[string]session
	pending  map[string]*challenge
}

// session is a logged-in user.
type session struct {
	user    string
	expires time.Time
}

// challenge is the first step of a form login that answered with a
// challenge: the transaction id stays here, the browser holds only the
// random key of this entry.
type challenge struct {
	user, txid, message, next string
	expires                   time.Time
	answers                   int
}

// NewAuth returns the middleware of the users of realm.
func NewAuth(v *validate.Validator, realm string) *Auth {
	return &Auth{v: v, Realm: realm, UserAgent: "authsrv-httpauth", SessionTTL: 8 * time.Hour, ChallengeTTL: 5 * time.Minute,
		sessions: map[string]session{}, pending: map[string]*challenge{}}
}

type userKey struct{}

// User is the login of the authenticated user of a request Wrap let
// through.
func User(ctx context.Context) string { u, _ := ctx.Value(userKey{}).(string); return u }

// Wrap protects next.
func (a *Auth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case loginPath:
			a.login(w, r)
			return
		case logoutPath:
			a.logout(w, r)
			return
		}
		// The session comes first: a browser resends its Basic
		// credentials, whose OTP is used up.
		user, ok := a.session(r)
		if !ok {
			if name, pass, basic := r.BasicAuth(); basic {
				res, err := a.check(r, validate.Request{User: name, Pass: pass})
				if err != nil {
					a.internal(w, err)
					return
				}
				if res.Value {
					user, ok = a.login1(w, r, name, res), true
				} else if res.TransactionID != "" {
					// A challenge (an e-mail was sent) can only be answered
					// in the form, which the cookie leads to.
					a.startChallenge(w, r, name, res, r.URL.Path)
					deny(w, res.Message+" (answer it at "+loginPath+")")
					return
				}
			}
		}
		if !ok {
			if strings.Contains(r.Header.Get("Accept"), "text/html") && r.Header.Get("Authorization") == "" {
				http.Redirect(w, r, loginPath+"?next="+url.QueryEscape(r.URL.Path), http.StatusSeeOther)
				return
			}
			deny(w, "authentication required: HTTP Basic with PIN+OTP as password, or the form at "+loginPath)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

// deny answers 401 with a Basic challenge.
func deny(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Basic realm="authsrv example", charset="UTF-8"`)
	http.Error(w, msg, http.StatusUnauthorized)
}

// check asks the library, as an anonymous caller from the browser's
// address. A refusal the library words as an error (an unknown user) is
// a failed authentication; other errors are returned.
func (a *Auth) check(r *http.Request, req validate.Request) (validate.Response, error) {
	req.Realm = a.Realm
	req.Caller = caller.Caller{Role: caller.Anonymous, Client: peer(r), UserAgent: a.UserAgent,
		Action: "httpauth " + r.Method + " " + r.URL.Path, Headers: policyHeaders(r.Header)}
	res, err := a.v.Check(r.Context(), req)
	if res.SendFailed && a.Log != nil {
		a.Log.Printf("httpauth: the challenge of %q could not be sent", req.User)
	}
	if e, ok := errors.AsType[*apierr.Error](err); ok && e.Status() < 500 {
		return validate.Response{}, nil
	}
	return res, err
}

// peer is the TCP peer. Behind a reverse proxy, take the client from
// the proxy's header instead, but only from a proxy you trust.
func peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// policyHeaders are the headers policy conditions may read: all but the
// credentials.
func policyHeaders(h http.Header) map[string][]string {
	c := h.Clone()
	c.Del("Authorization")
	c.Del("Cookie")
	return c
}

func (a *Auth) internal(w http.ResponseWriter, err error) {
	if a.Log != nil {
		a.Log.Printf("httpauth: %v", err)
	}
	http.Error(w, "internal error", http.StatusInternalServerError)
}

// login1 opens a session after a success and returns the user's login.
func (a *Auth) login1(w http.ResponseWriter, r *http.Request, name string, res validate.Response) string {
	if res.User.Login != "" {
		name = res.User.Login
	}
	id := rand.Text()
	a.mu.Lock()
	a.sweep()
	a.sessions[id] = session{user: name, expires: time.Now().Add(a.SessionTTL)}
	a.mu.Unlock()
	setCookie(w, r, sessionCookie, id, a.SessionTTL)
	return name
}

func (a *Auth) session(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[c.Value]
	if !ok || time.Now().After(s.expires) {
		return "", false
	}
	return s.user, true
}

// sweep drops expired sessions and challenges (a.mu held).
func (a *Auth) sweep() {
	now := time.Now()
	for id, s := range a.sessions {
		if now.After(s.expires) {
			delete(a.sessions, id)
		}
	}
	for id, c := range a.pending {
		if now.After(c.expires) {
			delete(a.pending, id)
		}
	}
}

// setCookie sets a cookie only this site's pages send (max age 0 deletes
// it).
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, ttl time.Duration) {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
		MaxAge: int(ttl / time.Second)}
	if ttl <= 0 {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

func (a *Auth) startChallenge(w http.ResponseWriter, r *http.Request, name string, res validate.Response, next string) *challenge {
	id := rand.Text()
	c := &challenge{user: name, txid: res.TransactionID, message: res.Message, next: next, expires: time.Now().Add(a.ChallengeTTL)}
	a.mu.Lock()
	a.sweep()
	a.pending[id] = c
	a.mu.Unlock()
	setCookie(w, r, challengeCookie, id, a.ChallengeTTL)
	return c
}

// challenge returns the request's pending challenge.
func (a *Auth) challenge(r *http.Request) (string, *challenge) {
	ck, err := r.Cookie(challengeCookie)
	if err != nil {
		return "", nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.pending[ck.Value]
	if !ok || time.Now().After(c.expires) {
		return "", nil
	}
	return ck.Value, c
}

func (a *Auth) dropChallenge(w http.ResponseWriter, r *http.Request, id string) {
	a.mu.Lock()
	delete(a.pending, id)
	a.mu.Unlock()
	setCookie(w, r, challengeCookie, "", 0)
}

var page = template.Must(template.New("login").Parse(`<!doctype html>
<title>Log in</title>
{{if .Error}}<p>{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="next" value="{{.Next}}">
{{if .Challenge}}<p>{{.Challenge}}</p>
<label>OTP <input name="otp" autocomplete="one-time-code" autofocus></label>
{{else}}<label>User <input name="user" autofocus></label>
<label>PIN and OTP <input name="password" type="password"></label>
{{end}}<button>Log in</button>
</form>
`))

func render(w http.ResponseWriter, status int, challenge, next, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = page.Execute(w, struct{ Challenge, Next, Error string }{challenge, next, msg})
}

// localPath keeps a redirect on this site.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, `/\`) {
		return "/"
	}
	return p
}

// login is the form: GET shows it (the second step when a challenge is
// pending), POST checks user and PIN+OTP, or the OTP of the challenge.
// The password and OTP are read from the body only, never the URL.
func (a *Auth) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		next := localPath(r.URL.Query().Get("next"))
		if _, c := a.challenge(r); c != nil {
			render(w, http.StatusOK, c.message, c.next, "")
			return
		}
		render(w, http.StatusOK, "", next, "")
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	next := localPath(r.PostForm.Get("next"))
	if r.PostForm.Has("otp") {
		a.answer(w, r)
		return
	}
	name := r.PostForm.Get("user")
	res, err := a.check(r, validate.Request{User: name, Pass: r.PostForm.Get("password")})
	switch {
	case err != nil:
		a.internal(w, err)
	case res.Value:
		a.login1(w, r, name, res)
		http.Redirect(w, r, next, http.StatusSeeOther)
	case res.TransactionID != "":
		c := a.startChallenge(w, r, name, res, next)
		render(w, http.StatusOK, c.message, next, "")
	default:
		render(w, http.StatusUnauthorized, "", next, "Authentication failed.")
	}
}

// answer is the second step: the OTP answers the pending challenge.
func (a *Auth) answer(w http.ResponseWriter, r *http.Request) {
	id, c := a.challenge(r)
	if c == nil {
		render(w, http.StatusUnauthorized, "", "/", "The challenge expired, log in again.")
		return
	}
	res, err := a.check(r, validate.Request{User: c.user, TransactionID: c.txid, Pass: r.PostForm.Get("otp")})
	if err != nil {
		a.internal(w, err)
		return
	}
	if res.Value {
		a.dropChallenge(w, r, id)
		a.login1(w, r, c.user, res)
		http.Redirect(w, r, c.next, http.StatusSeeOther)
		return
	}
	a.mu.Lock()
	c.answers++
	last := c.answers >= maxAnswers
	a.mu.Unlock()
	if last {
		a.dropChallenge(w, r, id)
		render(w, http.StatusUnauthorized, "", c.next, "Authentication failed.")
		return
	}
	render(w, http.StatusUnauthorized, c.message, c.next, "Wrong OTP.")
}

// logout ends the session (POST only).
func (a *Auth) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		a.mu.Lock()
		delete(a.sessions, c.Value)
		a.mu.Unlock()
	}
	setCookie(w, r, sessionCookie, "", 0)
	http.Redirect(w, r, loginPath, http.StatusSeeOther)
}
