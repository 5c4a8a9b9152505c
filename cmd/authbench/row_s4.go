package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Row S4: the refusals of /validate/check take the same time whatever the
// reason. Five paths (unknown user, user without tokens, disabled token,
// wrong PIN, wrong OTP), in a realm without policies and in one under
// hide_specific_error_message, are sent one after the other, s4Rounds times,
// each round starting at another path so that the machine's noise hits
// all alike. Each answer's time is taken relative to the median of its
// round; the medians of those ratios per path may differ by less than the
// bound (the catalogue's 10 %). The raw medians are reported too.

// s4Path is one refusal path and its times.
type s4Path struct {
	name  string
	form  string
	want  string // a fragment of the answer
	times []time.Duration
}

func (c *catalogue) rowS4(ctx context.Context) error {
	if err := c.writeUsers(ctx, []string{"alice", "bob", "carol"}); err != nil {
		return err
	}
	// The same users in a second realm under hide_specific_error_message,
	// through a second resolver on the same file.
	if _, err := c.api.post(ctx, "/resolver/cat_hidden", url.Values{"type": {"passwdresolver"},
		"fileName": {filepath.Join(c.cfg.dataDir, "files", "passwd")}}); err != nil {
		return fmt.Errorf("creating resolver cat_hidden: %w", err)
	}
	if _, err := c.api.post(ctx, "/realm/hidden", url.Values{"resolvers": {"cat_hidden"}}); err != nil {
		return fmt.Errorf("creating realm hidden: %w", err)
	}
	if _, err := c.api.post(ctx, "/policy/cat_hide", url.Values{"scope": {"authentication"}, "action": {"hide_specific_error_message"},
		"realm": {"hidden"}, "active": {"true"}}); err != nil {
		return fmt.Errorf("creating policy hide_specific_error_message: %w", err)
	}
	var paths []*s4Path
	for _, realm := range []string{c.realm, "hidden"} {
		for _, t := range []struct{ serial, user string }{{"S4A-" + realm, "alice"}, {"S4C-" + realm, "carol"}} {
			if _, err := c.api.post(ctx, "/token/init", url.Values{"type": {"hotp"}, "otpkey": {"3132333435363738393031323334353637383930"},
				"serial": {t.serial}, "user": {t.user}, "realm": {realm}, "pin": {"pin"}}); err != nil {
				return fmt.Errorf("enrolling %s: %w", t.serial, err)
			}
			// The refusals must not lock the token: a locked token is
			// another path, refused before any PIN check.
			if _, err := c.api.post(ctx, "/token/set", url.Values{"serial": {t.serial}, "max_failcount": {"1000000"}}); err != nil {
				return fmt.Errorf("max_failcount of %s: %w", t.serial, err)
			}
		}
		if _, err := c.api.post(ctx, "/token/disable", url.Values{"serial": {"S4C-" + realm}}); err != nil {
			return fmt.Errorf("disabling S4C-%s: %w", realm, err)
		}
		add := func(name, user, pass, want string) {
			if realm == "hidden" {
				want = `"message":"Authentication failed."`
				if name == "unknown user" {
					want = `"message":"ERR403: Authentication failed."`
				}
			}
			paths = append(paths, &s4Path{name: realm + "/" + name,
				form: url.Values{"user": {user}, "realm": {realm}, "pass": {pass}}.Encode(), want: want})
		}
		add("unknown user", "eve", "pin123456", `"code":904`)
		add("user without tokens", "bob", "pin123456", "The user has no tokens assigned")
		add("disabled token", "carol", "pin123456", `"value":false`)
		add("wrong PIN", "alice", "nip123456", "wrong otp pin")
		add("wrong OTP", "alice", "pin123456", "wrong otp value")
	}
	base := "http://" + c.srv.addr + "/validate/check"
	send := func(p *s4Path) (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base, strings.NewReader(p.form))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("User-Agent", userAgent)
		start := time.Now()
		resp, err := c.hc.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		d := time.Since(start)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if !strings.Contains(string(body), p.want) {
			return 0, fmt.Errorf("%s: HTTP %d %s, want an answer with %s", p.name, resp.StatusCode, snippet(body), p.want)
		}
		return d, nil
	}
	for _, p := range paths { // warm up, and check the answers
		if _, err := send(p); err != nil {
			return err
		}
	}
	for round := range c.cfg.s4Rounds {
		for i := range paths {
			p := paths[(round+i)%len(paths)]
			d, err := send(p)
			if err != nil {
				return err
			}
			p.times = append(p.times, d)
		}
	}
	rel := make([][]float64, len(paths))
	row := make([]time.Duration, len(paths))
	for round := range c.cfg.s4Rounds {
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
	rawLo, rawHi := time.Duration(0), time.Duration(0)
	medians := map[string]any{}
	for i, p := range paths {
		slices.Sort(rel[i])
		r := rel[i][len(rel[i])/2]
		slices.Sort(p.times)
		m := p.times[len(p.times)/2]
		if i == 0 {
			lo, rawLo = r, m
		}
		lo, hi = min(lo, r), max(hi, r)
		rawLo, rawHi = min(rawLo, m), max(rawHi, m)
		medians[p.name] = map[string]any{"median_ms": ms(m), "relative_median": r}
		fmt.Fprintf(c.log, "S4: %-27s median %7.2f ms, relative to its round %.3f\n", p.name, ms(m), r)
	}
	spread := (hi - lo) / lo
	rawSpread := float64(rawHi-rawLo) / float64(rawLo)
	c.set("rounds", c.cfg.s4Rounds)
	c.set("paths", medians)
	c.set("relative_spread", spread)
	c.set("median_spread", rawSpread)
	if spread >= c.b.S4Spread {
		c.res.fail("the refusal paths' relative medians differ by %.1f %% (bound %.0f %%)", 100*spread, 100*c.b.S4Spread)
	}
	return nil
}
