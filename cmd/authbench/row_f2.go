package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// f2Object is one object an F2 writer sent: a token, a policy or a
// resolver, with what it must hold when it exists.
type f2Object struct {
	kind  string // token, policy, resolver
	name  string
	key   []byte // token: HOTP key
	pin   string // token
	owner string // token: login in realm r1
	acked bool   // the server answered success
}

// f2Users are the owners of F2's tokens.
var f2Users = []string{"f2u1", "f2u2", "f2u3", "f2u4", "f2u5"}

// rowF2: writers loop POST /token/init, POST /policy/<name> and POST
// /resolver/<name> with unique names; the server gets SIGKILL at a random
// moment, is started again, and every acknowledged object must be there
// and complete (a token validates with its PIN and OTP and has its owner;
// a policy and a resolver hold what was sent), every unacknowledged one
// complete or absent. -cycles times.
func (c *catalogue) rowF2(ctx context.Context) error {
	if err := c.writeUsers(ctx, f2Users); err != nil {
		return err
	}
	usersFile := filepath.Join(c.cfg.dataDir, "files", "passwd")
	var totals struct{ sent, acked, ackedChecked, unackedPresent, unackedAbsent int }
	present := map[string]int{} // kind -> objects found after their cycle's restart
	var restarts []float64
	for cycle := range c.cfg.cycles {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		objs, werr := c.f2Write(ctx, cycle, usersFile)
		if werr != nil {
			return fmt.Errorf("cycle %d: %w", cycle+1, werr)
		}
		t0 := time.Now()
		if err := c.srv.start(ctx); err != nil {
			return fmt.Errorf("cycle %d: restart after kill -9: %w", cycle+1, err)
		}
		if err := c.waitReady(ctx); err != nil {
			return fmt.Errorf("cycle %d: %w", cycle+1, err)
		}
		restarts = append(restarts, round3(time.Since(t0).Seconds()))
		if err := c.login(ctx); err != nil {
			return fmt.Errorf("cycle %d: after the restart: %w", cycle+1, err)
		}
		for _, o := range objs {
			totals.sent++
			found, problem, err := c.f2Check(ctx, o, usersFile)
			if err != nil {
				return fmt.Errorf("cycle %d: checking %s %s: %w", cycle+1, o.kind, o.name, err)
			}
			switch {
			case o.acked && !found:
				c.res.fail("cycle %d: acknowledged %s %s is missing after kill -9", cycle+1, o.kind, o.name)
			case found && problem != "":
				c.res.fail("cycle %d: %s %s (acknowledged: %t) is incomplete after kill -9: %s", cycle+1, o.kind, o.name, o.acked, problem)
			}
			if found {
				present[o.kind]++
			}
			switch {
			case o.acked:
				totals.acked++
				if found && problem == "" {
					totals.ackedChecked++
				}
			case found:
				totals.unackedPresent++
			default:
				totals.unackedAbsent++
			}
		}
		fmt.Fprintf(c.log, "F2: cycle %d: %d objects sent, checked after the restart\n", cycle+1, len(objs))
	}
	// The later kills took nothing an earlier cycle found: the server
	// holds exactly the objects found after their own cycle.
	held, err := c.f2Held(ctx)
	if err != nil {
		return err
	}
	for _, kind := range []string{"token", "policy", "resolver"} {
		if held[kind] != present[kind] {
			c.res.fail("after the last cycle the server holds %d F2 %ss; %d were found after their own cycles", held[kind], kind, present[kind])
		}
	}
	c.set("held_at_end", held)
	c.set("cycles", c.cfg.cycles)
	c.set("objects_sent", totals.sent)
	c.set("acknowledged", totals.acked)
	c.set("acknowledged_complete", totals.ackedChecked)
	c.set("unacknowledged_present_complete", totals.unackedPresent)
	c.set("unacknowledged_absent", totals.unackedAbsent)
	c.set("restart_to_ready_seconds", restarts)
	if totals.acked == 0 {
		c.res.fail("no write was acknowledged before the kills")
	}
	return nil
}

// waitReady polls /healthz/readyz for 30 s.
func (c *catalogue) waitReady(ctx context.Context) error {
	api := &apiClient{base: "http://" + c.srv.addr, hc: c.hc, timeout: c.cfg.timeout}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := api.getRaw(ctx2, "/healthz/readyz")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not ready 30 s after the restart: %v", err)
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// f2Write runs the writers until a random moment between -kill-min and
// -kill-max, kills the server with SIGKILL and returns every object a
// writer sent.
func (c *catalogue) f2Write(ctx context.Context, cycle int, usersFile string) ([]*f2Object, error) {
	var mu sync.Mutex
	var objs []*f2Object
	var firstRefusal error
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for w := range c.cfg.f2Workers {
		wg.Go(func() {
			for i := 0; wctx.Err() == nil; i++ {
				o := newF2Object(cycle, w, i)
				mu.Lock()
				objs = append(objs, o)
				mu.Unlock()
				err := c.f2Send(wctx, o, usersFile)
				mu.Lock()
				if err == nil {
					o.acked = true
				} else if ae := (*apiError)(nil); errors.As(err, &ae) && firstRefusal == nil {
					// An answer that is an error while the server runs is
					// not the kill: the write itself was refused.
					firstRefusal = fmt.Errorf("%s %s refused: %w", o.kind, o.name, err)
				}
				mu.Unlock()
				var ae *apiError
				if err != nil && !errors.As(err, &ae) {
					return // the connection failed: the server is gone
				}
			}
		})
	}
	sleep(ctx, randomBetween(c.cfg.killMin, c.cfg.killMax))
	c.srv.kill()
	// Writers see the connection fail; give them a moment, then stop.
	sleep(ctx, 100*time.Millisecond)
	stop()
	wg.Wait()
	c.hc.CloseIdleConnections()
	return objs, firstRefusal
}

func randomBetween(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(hi-lo)))
	if err != nil {
		return lo
	}
	return lo + time.Duration(n.Int64())
}

func newF2Object(cycle, w, i int) *f2Object {
	o := &f2Object{name: fmt.Sprintf("F2c%dw%dn%d", cycle+1, w, i)}
	switch (w + i) % 3 {
	case 0:
		o.kind = "token"
		o.key = make([]byte, keySize)
		_, _ = rand.Read(o.key)
		o.pin = "pin" + o.name
		o.owner = f2Users[i%len(f2Users)]
	case 1:
		o.kind = "policy"
	default:
		o.kind = "resolver"
	}
	return o
}

// The policy every F2 writer sends: the default otppin, said explicitly,
// for realm r1, so it changes nothing the checks depend on.
const (
	f2PolicyScope  = "authentication"
	f2PolicyAction = "otppin=tokenpin"
)

func (c *catalogue) f2Send(ctx context.Context, o *f2Object, usersFile string) error {
	var err error
	switch o.kind {
	case "token":
		_, err = c.api.post(ctx, "/token/init", url.Values{"type": {"hotp"}, "serial": {o.name}, "otpkey": {hex.EncodeToString(o.key)},
			"pin": {o.pin}, "user": {o.owner}, "realm": {c.realm}})
	case "policy":
		_, err = c.api.post(ctx, "/policy/"+o.name, url.Values{"scope": {f2PolicyScope}, "action": {f2PolicyAction},
			"realm": {c.realm}, "active": {"true"}})
	case "resolver":
		_, err = c.api.post(ctx, "/resolver/"+o.name, url.Values{"type": {"passwdresolver"}, "fileName": {usersFile}})
	}
	return err
}

// f2Check reports whether o exists after the restart and, if so, what is
// wrong with it ("" when it is complete).
func (c *catalogue) f2Check(ctx context.Context, o *f2Object, usersFile string) (bool, string, error) {
	switch o.kind {
	case "token":
		env, err := c.api.get(ctx, "/token/?serial="+url.QueryEscape(o.name))
		if err != nil {
			return false, "", err
		}
		var v struct {
			Tokens []struct {
				Serial   string `json:"serial"`
				Username string `json:"username"`
				Realm    string `json:"user_realm"`
			} `json:"tokens"`
		}
		if err := json.Unmarshal(env.Result.Value, &v); err != nil {
			return false, "", fmt.Errorf("token list: %w", err)
		}
		if len(v.Tokens) == 0 {
			return false, "", nil
		}
		t := v.Tokens[0]
		if len(v.Tokens) != 1 || t.Serial != o.name {
			return true, fmt.Sprintf("%d tokens listed for serial %s", len(v.Tokens), o.name), nil
		}
		if t.Username != o.owner || t.Realm != c.realm {
			return true, fmt.Sprintf("owner %q in realm %q, want %q in %q", t.Username, t.Realm, o.owner, c.realm), nil
		}
		// PIN and seed: the PIN followed by the first HOTP value.
		chk, err := c.api.post(ctx, "/validate/check", url.Values{"serial": {o.name}, "pass": {o.pin + newHOTP(o.key, otpDigits).At(0)}})
		if err != nil {
			return true, "", err
		}
		if string(chk.Result.Value) != "true" {
			return true, "its PIN and first OTP are refused (seed or PIN hash lost)", nil
		}
		return true, "", nil
	case "policy":
		env, err := c.api.get(ctx, "/policy/"+o.name)
		if err != nil {
			return false, "", err
		}
		var v map[string]struct {
			Scope  string `json:"scope"`
			Action any    `json:"action"`
			Realm  any    `json:"realm"`
			Active bool   `json:"active"`
		}
		if err := json.Unmarshal(env.Result.Value, &v); err != nil {
			return false, "", fmt.Errorf("policy answer: %w", err)
		}
		p, ok := v[o.name]
		if !ok {
			return false, "", nil
		}
		action, _ := json.Marshal(p.Action)
		realm, _ := json.Marshal(p.Realm)
		if p.Scope != f2PolicyScope || !p.Active || !strings.Contains(string(action), "otppin") || !strings.Contains(string(realm), c.realm) {
			return true, fmt.Sprintf("scope %q active %t action %s realm %s", p.Scope, p.Active, action, realm), nil
		}
		return true, "", nil
	default:
		env, err := c.api.get(ctx, "/resolver/"+o.name)
		if err != nil {
			return false, "", err
		}
		var v map[string]struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(env.Result.Value, &v); err != nil {
			return false, "", fmt.Errorf("resolver answer: %w", err)
		}
		r, ok := v[o.name]
		if !ok {
			return false, "", nil
		}
		if r.Type != "passwdresolver" || r.Data["fileName"] != usersFile {
			return true, fmt.Sprintf("type %q data %v", r.Type, r.Data), nil
		}
		return true, "", nil
	}
}

// f2Held counts the F2 tokens, policies and resolvers the server holds.
func (c *catalogue) f2Held(ctx context.Context) (map[string]int, error) {
	held := map[string]int{}
	env, err := c.api.get(ctx, "/token/?serial="+url.QueryEscape("F2c*")+"&pagesize=1")
	if err != nil {
		return nil, fmt.Errorf("listing the F2 tokens: %w", err)
	}
	n, err := count(env)
	if err != nil {
		return nil, err
	}
	held["token"] = int(n)
	for kind, path := range map[string]string{"policy": "/policy/", "resolver": "/resolver/"} {
		env, err := c.api.get(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", path, err)
		}
		var v map[string]json.RawMessage
		if err := json.Unmarshal(env.Result.Value, &v); err != nil {
			return nil, fmt.Errorf("%s answer: %w", path, err)
		}
		for name := range v {
			if strings.HasPrefix(name, "F2c") {
				held[kind]++
			}
		}
	}
	return held, nil
}
