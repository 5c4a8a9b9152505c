package server_test

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
)

// timingKDF makes one key derivation the bulk of a refusal (about 30 ms
// here, 90 ms under -race: the race detector slows the Go code around it
// more than Argon2's assembly), so that a path without one stands out.
var timingKDF = authsrv.KDFParams{Time: 2, Memory: 32 * 1024, Threads: 1, KeyLen: 32, SaltLen: 16}

// Catalogue row S4 (shared/spec/reliability.md): the refusals of
// /validate/check take the same time whatever the reason, so that timing
// does not tell which users exist, which have tokens, or whose PIN is
// right. Five refusal paths, in a realm without policies and in one under
// hide_specific_error_message, are sent timingRounds times each through the
// HTTP handler, interleaved (each round sends every path once, starting
// at a different path), so that machine noise hits all alike; the median
// latencies may differ by less than timingBound of their smallest.
const (
	timingRounds = 15
	timingBound  = 0.10
)

func TestTimingUnknownUser(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithKDFParams(timingKDF)})
	tok := e.login(t)
	type path struct {
		name   string
		body   string
		status int
		want   string // a fragment of the answer
		times  []time.Duration
	}
	var paths []*path
	for _, rc := range []struct{ realm, resolver string }{{"plain", "mem1"}, {"hidden", "mem2"}} {
		wantOK(t, e.admin(t, tok, "POST", "/resolver/"+rc.resolver, form("type", "memresolver")))
		wantOK(t, e.admin(t, tok, "POST", "/realm/"+rc.realm, form("resolvers", rc.resolver)))
		for _, u := range []struct{ serial, user string }{{"A", "alice"}, {"C", "carol.smith"}} {
			serial := u.serial + "-" + rc.realm
			wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", serial, "otpkey", rfcKeyHex, "user", u.user, "realm", rc.realm, "pin", "pin")))
			// The refusals must not lock the token (a locked token is
			// refused without a PIN check: one more path, not this one).
			wantOK(t, e.admin(t, tok, "POST", "/token/set", form("serial", serial, "max_failcount", "100000")))
		}
		wantOK(t, e.admin(t, tok, "POST", "/token/disable", form("serial", "C-"+rc.realm)))
		unknown, unknownStatus := `"code":904`, 400
		if rc.realm == "hidden" {
			setPolicy(t, e, tok, "hide", "authentication", "hide_specific_error_message", "realm", rc.realm)
			unknown, unknownStatus = `"message":"ERR403: Authentication failed."`, 401
		}
		req := func(name, user, pass string, status int, want string) {
			if rc.realm == "hidden" && status == 200 {
				want = `"message":"Authentication failed."`
			}
			paths = append(paths, &path{name: rc.realm + "/" + name, body: form("user", user, "realm", rc.realm, "pass", pass), status: status, want: want})
		}
		req("unknown user", "eve", "pin123456", unknownStatus, unknown)
		req("user without tokens", "bob", "pin123456", 200, "The user has no tokens assigned")
		req("disabled token", "carol.smith", "pin123456", 200, `"value":false`)
		req("wrong PIN", "alice", "nip123456", 200, "wrong otp pin")
		req("wrong OTP", "alice", "pin123456", 200, "wrong otp value")
	}
	send := func(p *path) time.Duration {
		r := httptest.NewRequest("POST", "/validate/check", strings.NewReader(p.body))
		r.Header.Set("Content-Type", formType)
		r.RemoteAddr = "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		start := time.Now()
		e.h.ServeHTTP(rec, r)
		d := time.Since(start)
		if rec.Code != p.status || !strings.Contains(rec.Body.String(), p.want) {
			t.Fatalf("%s: %d %s, want %d with %s", p.name, rec.Code, rec.Body, p.status, p.want)
		}
		return d
	}
	for _, p := range paths {
		send(p) // warm up (and check the answers)
	}
	for round := range timingRounds {
		for i := range paths {
			p := paths[(round+i)%len(paths)]
			p.times = append(p.times, send(p))
		}
	}
	var lo, hi time.Duration
	var report strings.Builder
	for i, p := range paths {
		slices.Sort(p.times)
		m := p.times[len(p.times)/2]
		if i == 0 || m < lo {
			lo = m
		}
		hi = max(hi, m)
		fmt.Fprintf(&report, "\n  %-28s median %6.1f ms  (min %6.1f, max %6.1f)", p.name, ms(m), ms(p.times[0]), ms(p.times[len(p.times)-1]))
	}
	spread := float64(hi-lo) / float64(lo)
	t.Logf("medians of %d interleaved requests per path (spread %.1f %%):%s", timingRounds, 100*spread, report.String())
	if spread >= timingBound {
		t.Errorf("the medians differ by %.1f %% (bound %.0f %%): timing tells the refusals apart", 100*spread, 100*timingBound)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
