//go:build unix

package server_test

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
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
// ratios are compared.
//
// Two clocks are read per request: the wall clock, and the CPU time of
// this test process (getrusage), which other processes on the machine do
// not change. The CPU-time medians must differ by less than timingBound,
// the wall-clock ones by less than timingWallBound. A path without the
// dummy derivation reads about 0.01 and one with two derivations about 2
// on either clock, so both bounds tell them apart with a wide margin.
// Without load the wall ratios differ by about 3 %; beside the rest of the
// suite under -race on 2 cores they differed by up to 43 %, and by up to
// 65 % beside two busy loops, while the process's CPU time stayed within
// 3 to 4.5 % in the same runs. The wall-clock bound is therefore only a
// backstop (a path that sleeps or skips the derivation), and the
// catalogue's 10 % on the wall clock is checked against the binary
// (authbench catalogue -row S4).
const (
	timingRounds    = 15
	timingBatches   = 3
	timingBound     = 0.10
	timingWallBound = 0.90
)

// timedPath is one refusal path of TestTimingUnknownUser and its times.
type timedPath struct {
	name   string
	body   string
	status int
	want   string          // a fragment of the answer
	times  []time.Duration // wall clock
	cpu    []time.Duration // the process's CPU time
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
		cpu0 := processCPU(t)
		start := time.Now()
		e.h.ServeHTTP(rec, r)
		d := time.Since(start)
		p.cpu = append(p.cpu, processCPU(t)-cpu0)
		if rec.Code != p.status || !strings.Contains(rec.Body.String(), p.want) {
			t.Fatalf("%s: %d %s, want %d with %s", p.name, rec.Code, rec.Body, p.status, p.want)
		}
		return d
	}
	for _, p := range paths {
		send(p) // warm up (and check the answers)
		p.cpu = p.cpu[:0]
	}
	// A burst of load can still tip one batch of rounds over the bound;
	// more rounds then decide. A real leak does not shrink with more
	// samples (a missing derivation reads about 0.01, a double one 2).
	var cpuSpread, wallSpread float64
	for batch := range timingBatches {
		for round := range timingRounds {
			for i := range paths {
				p := paths[(batch*timingRounds+round+i)%len(paths)]
				p.times = append(p.times, send(p))
			}
		}
		var cpuReport, wallReport string
		cpuSpread, cpuReport = timingSpread(paths, func(p *timedPath) []time.Duration { return p.cpu })
		wallSpread, wallReport = timingSpread(paths, func(p *timedPath) []time.Duration { return p.times })
		t.Logf("after %d interleaved requests per path the relative medians differ by %.1f %% in CPU time and by %.1f %% on the wall clock:\nCPU time:%s\nwall clock:%s",
			(batch+1)*timingRounds, 100*cpuSpread, 100*wallSpread, cpuReport, wallReport)
		if cpuSpread < timingBound && wallSpread < timingWallBound {
			return
		}
	}
	t.Errorf("after %d rounds the relative medians differ by %.1f %% in CPU time (bound %.0f %%) and by %.1f %% on the wall clock (bound %.0f %%): timing tells the refusals apart",
		timingBatches*timingRounds, 100*cpuSpread, 100*timingBound, 100*wallSpread, 100*timingWallBound)
}

// processCPU is the CPU time this process has used so far, user and system.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timingSpread takes each path's time relative to the median of its round,
// and the median of those over the rounds (a burst of load on the machine
// that slows a whole round cancels out), and returns how far the highest
// of these medians lies above the lowest, with a report per path.
func timingSpread(paths []*timedPath, times func(*timedPath) []time.Duration) (float64, string) {
	rounds := len(times(paths[0]))
	rel := make([][]float64, len(paths))
	for round := range rounds {
		row := make([]time.Duration, len(paths))
		for i, p := range paths {
			row[i] = times(p)[round]
		}
		slices.Sort(row)
		mid := row[len(row)/2]
		for i, p := range paths {
			rel[i] = append(rel[i], float64(times(p)[round])/float64(mid))
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
		sorted := slices.Sorted(slices.Values(times(p)))
		fmt.Fprintf(&report, "\n  %-28s median %6.1f ms (min %6.1f, max %6.1f), relative to its round %.3f",
			p.name, ms(sorted[len(sorted)/2]), ms(sorted[0]), ms(sorted[len(sorted)-1]), r)
	}
	return (hi - lo) / lo, report.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
