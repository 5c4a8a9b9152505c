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
// /validate/check cost the same whatever the reason, so that timing does
// not tell which users exist, which have tokens, or whose PIN is right.
// Five refusal paths, in a realm without policies and in one under
// hide_specific_error_message, are sent timingRounds times each through the
// HTTP handler, interleaved (each round sends every path once, starting
// at a different path).
//
// The assertion is on the CPU time the process spends on each request
// (user and system, getrusage): the per-path medians may differ by less
// than timingBound. A path without the dummy derivation costs about a
// thirtieth of the others and one with two derivations twice as much, so
// the bound tells them apart with a wide margin. Wall time is logged, not
// asserted: on a loaded 2-core machine under -race it is mostly the wait
// for a core, and even taken relative to the median of its round its
// medians differed by up to 65 % between paths that do the same work
// (three runs of three beside two busy loops and a -race run of this
// package), while the CPU-time medians differed by 3 to 4.5 % in the same
// runs. The catalogue's wall-clock figure is checked against the binary.
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
		want   string          // a fragment of the answer
		times  []time.Duration // wall
		cpu    []time.Duration // process CPU
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
	send := func(p *path) (wall, cpu time.Duration) {
		r := httptest.NewRequest("POST", "/validate/check", strings.NewReader(p.body))
		r.Header.Set("Content-Type", formType)
		r.RemoteAddr = "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		c0, start := cpuTime(), time.Now()
		e.h.ServeHTTP(rec, r)
		wall, cpu = time.Since(start), cpuTime()-c0
		if rec.Code != p.status || !strings.Contains(rec.Body.String(), p.want) {
			t.Fatalf("%s: %d %s, want %d with %s", p.name, rec.Code, rec.Body, p.status, p.want)
		}
		return wall, cpu
	}
	for _, p := range paths {
		send(p) // warm up (and check the answers)
	}
	for round := range timingRounds {
		for i := range paths {
			p := paths[(round+i)%len(paths)]
			wall, cpu := send(p)
			p.times, p.cpu = append(p.times, wall), append(p.cpu, cpu)
		}
	}
	// For the log: each path's wall time relative to the median of its
	// round, and the median of those over the rounds (a burst of load
	// that slows a whole round cancels out, one that slows single
	// requests does not).
	rel := make([][]float64, len(paths))
	for round := range timingRounds {
		row := make([]time.Duration, len(paths))
		for i, p := range paths {
			row[i] = p.times[round]
		}
		slices.Sort(row)
		mid := row[len(row)/2]
		for i, p := range paths {
			rel[i] = append(rel[i], float64(p.times[round])/float64(mid))
		}
	}
	lo, hi := 0.0, 0.0
	var report strings.Builder
	for i, p := range paths {
		slices.Sort(rel[i])
		cpu := slices.Sorted(slices.Values(p.cpu))
		c := float64(cpu[len(cpu)/2])
		if i == 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
		wall := slices.Sorted(slices.Values(p.times))
		fmt.Fprintf(&report, "\n  %-28s CPU median %6.1f ms (min %6.1f, max %6.1f); wall median %6.1f ms (min %6.1f, max %6.1f), relative to its round %.3f",
			p.name, ms(cpu[len(cpu)/2]), ms(cpu[0]), ms(cpu[len(cpu)-1]),
			ms(wall[len(wall)/2]), ms(wall[0]), ms(wall[len(wall)-1]), rel[i][len(rel[i])/2])
	}
	if hi <= 0 {
		t.Fatal("no CPU time measured (getrusage)")
	}
	spread := (hi - lo) / lo // +Inf when a path costs no measurable CPU
	t.Logf("%d interleaved requests per path; the CPU-time medians differ by %.1f %%:%s", timingRounds, 100*spread, report.String())
	if spread >= timingBound {
		t.Errorf("the CPU-time medians differ by %.1f %% (bound %.0f %%): the refusals do different work", 100*spread, 100*timingBound)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
