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
// at a different path), so that machine noise hits all alike. Each time is
// taken relative to the median of its round, and the medians of those
// ratios may differ by less than timingBound. A path without the dummy
// derivation reads about 0.01 and one with two derivations about 2, so
// the bound tells them apart with a wide margin; without load the ratios
// differ by about 3 %, but on a loaded 2-core machine under -race by up
// to 8 % (10 runs beside a -race run of this package; raw medians there
// differed by up to 80 %), which is why the bound is not the catalogue's
// 10 %: the catalogue's figure is checked against the binary.
const (
	timingRounds  = 15
	timingBatches = 3
	timingBound   = 0.20
)

// timedPath is one refusal path of TestTimingUnknownUser and its times.
type timedPath struct {
	name   string
	body   string
	status int
	want   string // a fragment of the answer
	times  []time.Duration
}

func TestTimingUnknownUser(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithKDFParams(timingKDF)})
	tok := e.login(t)
	var paths []*timedPath
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
			paths = append(paths, &timedPath{name: rc.realm + "/" + name, body: form("user", user, "realm", rc.realm, "pass", pass), status: status, want: want})
		}
		req("unknown user", "eve", "pin123456", unknownStatus, unknown)
		req("user without tokens", "bob", "pin123456", 200, "The user has no tokens assigned")
		req("disabled token", "carol.smith", "pin123456", 200, `"value":false`)
		req("wrong PIN", "alice", "nip123456", 200, "wrong otp pin")
		req("wrong OTP", "alice", "pin123456", 200, "wrong otp value")
	}
	send := func(p *timedPath) time.Duration {
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
	// A burst of load can still tip one batch of rounds over the bound;
	// more rounds then decide. A real leak does not shrink with more
	// samples (a missing derivation reads about 0.01, a double one 2).
	var spread float64
	var report string
	for batch := range timingBatches {
		for round := range timingRounds {
			for i := range paths {
				p := paths[(batch*timingRounds+round+i)%len(paths)]
				p.times = append(p.times, send(p))
			}
		}
		spread, report = timingSpread(paths)
		t.Logf("after %d interleaved requests per path the relative medians differ by %.1f %%:%s", (batch+1)*timingRounds, 100*spread, report)
		if spread < timingBound {
			return
		}
	}
	t.Errorf("the relative medians differ by %.1f %% (bound %.0f %%) after %d rounds: timing tells the refusals apart", 100*spread, 100*timingBound, timingBatches*timingRounds)
}

// timingSpread takes each path's time relative to the median of its round,
// and the median of those over the rounds (a burst of load on the machine
// that slows a whole round cancels out), and returns how far the highest
// of these medians lies above the lowest, with a report per path.
func timingSpread(paths []*timedPath) (float64, string) {
	rounds := len(paths[0].times)
	rel := make([][]float64, len(paths))
	for round := range rounds {
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
		r := rel[i][len(rel[i])/2]
		if i == 0 || r < lo {
			lo = r
		}
		hi = max(hi, r)
		sorted := slices.Sorted(slices.Values(p.times))
		fmt.Fprintf(&report, "\n  %-28s median %6.1f ms (min %6.1f, max %6.1f), relative to its round %.3f",
			p.name, ms(sorted[len(sorted)/2]), ms(sorted[0]), ms(sorted[len(sorted)-1]), r)
	}
	return (hi - lo) / lo, report.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
