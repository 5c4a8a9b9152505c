package main

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The L1 setup: user load1 in realm r1 (a passwd file in the data
// directory's files folder), policy otppin=none, and a pw token whose
// password is l1Pass: /validate/check runs HTTP, store and audit without
// a KDF.
const (
	l1User   = "load1"
	l1Pass   = "secret"
	l1Serial = "L1PW"
)

// writeUsers writes a passwd file with logins into the data directory's
// files folder (a file root the server allows by default) and creates
// resolver cat_passwd and realm r1 on it.
func (c *catalogue) writeUsers(ctx context.Context, logins []string) error {
	var b strings.Builder
	for i, l := range logins {
		uid := strconv.Itoa(firstUID + i + 1)
		b.WriteString(l + ":x:" + uid + ":" + uid + ":Catalogue User,,,:/home/c:/bin/false\n")
	}
	path := filepath.Join(c.cfg.dataDir, "files", "passwd")
	if err := writeAtomic(path, 0o644, func(w io.Writer) error { _, err := io.WriteString(w, b.String()); return err }); err != nil {
		return fmt.Errorf("passwd file: %w", err)
	}
	if _, err := c.api.post(ctx, "/resolver/cat_passwd", url.Values{"type": {"passwdresolver"}, "fileName": {path}}); err != nil {
		return fmt.Errorf("creating resolver cat_passwd: %w", err)
	}
	if _, err := c.api.post(ctx, "/realm/"+c.realm, url.Values{"resolvers": {"cat_passwd"}}); err != nil {
		return fmt.Errorf("creating realm %s: %w", c.realm, err)
	}
	return nil
}

func (c *catalogue) setupPW(ctx context.Context) error {
	if err := c.writeUsers(ctx, []string{l1User}); err != nil {
		return err
	}
	if _, err := c.api.post(ctx, "/policy/cat_otppin", url.Values{"scope": {"authentication"}, "action": {"otppin=none"},
		"realm": {c.realm}, "active": {"true"}}); err != nil {
		return fmt.Errorf("creating policy otppin=none: %w", err)
	}
	if _, err := c.api.post(ctx, "/token/init", url.Values{"type": {"pw"}, "otpkey": {l1Pass}, "serial": {l1Serial},
		"user": {l1User}, "realm": {c.realm}}); err != nil {
		return fmt.Errorf("enrolling the pw token: %w", err)
	}
	return nil
}

// validateCount is how many audit entries of /validate/ requests exist.
func (c *catalogue) validateCount(ctx context.Context) (int64, error) {
	env, err := c.api.get(ctx, "/audit/?action="+url.QueryEscape("*validate*")+"&page_size=1")
	if err != nil {
		return 0, fmt.Errorf("counting audit entries: %w", err)
	}
	return count(env)
}

// phase is the outcome of one validate load phase.
type phase struct {
	Requests  int64     `json:"requests"`
	Successes int64     `json:"successes"`
	Errors    int64     `json:"errors"`
	Seconds   float64   `json:"seconds"`
	PerSecond float64   `json:"requests_per_second"`
	LatencyMS latencyMS `json:"latency_ms"`
	FirstErr  string    `json:"first_error,omitempty"`
	p99       time.Duration
}

// validateLoad sends the L1 request from clients goroutines for d; with
// perSec > 0 the clients together send at most perSec requests a second.
func (c *catalogue) validateLoad(ctx context.Context, clients int, d time.Duration, perSec float64) phase {
	form := encodeForm(url.Values{"user": {l1User}, "realm": {c.realm}, "pass": {l1Pass}})
	base := "http://" + c.srv.addr
	end := time.Now().Add(d)
	// With a rate, request n (counting from 1, over all clients) waits
	// until start + n/perSec: the average rate holds also when a client
	// was late.
	var sent atomic.Int64
	start := time.Now()
	tallies := make([]tally, clients)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			t := &tallies[w]
			for ctx.Err() == nil && time.Now().Before(end) {
				if perSec > 0 {
					due := start.Add(time.Duration(float64(sent.Add(1)) / perSec * float64(time.Second)))
					if due.After(end) {
						return
					}
					sleep(ctx, time.Until(due))
					if ctx.Err() != nil {
						return
					}
				}
				t0 := time.Now()
				o, msg := c.checkOnce(ctx, base, form)
				if o == outCancelled {
					return
				}
				t.record(o, time.Since(t0), msg)
				if o == outTransport {
					sleep(ctx, transportBackoff)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := &tally{}
	for i := range tallies {
		total.merge(&tallies[i])
	}
	st := summarize(total.lat)
	p := phase{
		Requests: total.requests, Successes: total.ok, Errors: total.status + total.transport + total.value,
		Seconds:   round3(elapsed.Seconds()),
		LatencyMS: latencyMS{P50: ms(st.P50), P90: ms(st.P90), P99: ms(st.P99), Max: ms(st.Max), Mean: ms(st.Mean)},
		p99:       st.P99,
	}
	if elapsed > 0 {
		p.PerSecond = math.Round(float64(total.requests)/elapsed.Seconds()*10) / 10
	}
	for _, s := range total.samples {
		if s != "" && p.FirstErr == "" {
			p.FirstErr = s
		}
	}
	return p
}

// checkOnce sends one /validate/check and wants HTTP 200, value true.
func (c *catalogue) checkOnce(ctx context.Context, base, form string) (outcome, string) {
	return postCheck(ctx, c.hc, c.cfg.timeout, base, form, true)
}

// checkPhase fails the row for errors in a phase.
func (c *catalogue) checkPhase(name string, p phase) {
	if p.Errors > 0 {
		c.res.fail("%s: %d of %d validate requests were not HTTP 200 with value true (first: %s)", name, p.Errors, p.Requests, p.FirstErr)
	}
	if p.Requests == 0 {
		c.res.fail("%s: no request completed", name)
	}
}

// settle closes our idle connections and waits until the server's
// descriptors are back at most slack above base (10 s at most); it
// returns the last sample.
func (c *catalogue) settle(ctx context.Context, base int64, slack int64) (procSample, error) {
	c.hc.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := c.sample()
		if err != nil {
			return s, err
		}
		if s.FDs <= base+slack || time.Now().After(deadline) || ctx.Err() != nil {
			return s, nil
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// waitAudit waits (10 s at most) until the audit holds want validate
// entries and returns the last count.
func (c *catalogue) waitAudit(ctx context.Context, want int64) (int64, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.validateCount(ctx)
		if err != nil || n >= want || time.Now().After(deadline) || ctx.Err() != nil {
			return n, err
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// l1Run is L1's load with its before and after measurements; L1 and L6
// share it (L6 with a rate and a sampler).
type l1Run struct {
	idle, before, after procSample
	warm, load          phase
}

// rowL1: only 200s with value true, p99 bound, RSS after within the bound
// of before, descriptors back to the idle baseline, audit entries added =
// requests sent.
func (c *catalogue) rowL1(ctx context.Context) error {
	if err := c.setupPW(ctx); err != nil {
		return err
	}
	idle, err := c.settleIdle(ctx)
	if err != nil {
		return err
	}
	auditBefore, err := c.validateCount(ctx)
	if err != nil {
		return err
	}
	var warm phase
	if c.cfg.warmup > 0 {
		warm = c.validateLoad(ctx, c.cfg.clients, c.cfg.warmup, 0)
		c.checkPhase("warm-up", warm)
	}
	before, err := c.settle(ctx, idle.FDs, c.b.FDSlack)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.log, "L1: %d clients for %s\n", c.cfg.clients, c.cfg.duration)
	load := c.validateLoad(ctx, c.cfg.clients, c.cfg.duration, 0)
	c.checkPhase("load", load)
	after, err := c.settle(ctx, idle.FDs, c.b.FDSlack)
	if err != nil {
		return err
	}
	sent := warm.Requests + load.Requests
	got, err := c.waitAudit(ctx, auditBefore+sent)
	if err != nil {
		return err
	}
	c.set("load", load)
	c.set("warmup", warm)
	c.set("idle", idle)
	c.set("before", before)
	c.set("after", after)
	c.set("requests_sent", sent)
	c.set("audit_added", got-auditBefore)
	c.checkL1(load, idle, before, after)
	if got-auditBefore != sent {
		c.res.fail("audit: %d validate entries added, %d requests sent", got-auditBefore, sent)
	}
	return nil
}

// settleIdle is the baseline of an idle server after the setup.
func (c *catalogue) settleIdle(ctx context.Context) (procSample, error) {
	c.hc.CloseIdleConnections()
	sleep(ctx, 500*time.Millisecond)
	return c.sample()
}

func (c *catalogue) set(k string, v any) { c.res.set(k, v) }

func (c *catalogue) checkL1(load phase, idle, before, after procSample) {
	if c.b.L1P99 > 0 && load.p99 > c.b.L1P99 {
		c.res.fail("p99 %.3f ms > %s", load.LatencyMS.P99, c.b.L1P99)
	}
	// The bound holds for the process's own memory (RssAnon). VmRSS also
	// counts the resident pages of the store's memory map, which grow
	// with the store (each request adds an audit entry); they are
	// reported, not bounded.
	if lim := float64(before.AnonKB) * (1 + c.b.RSSGrowth); float64(after.AnonKB) > lim {
		c.res.fail("RssAnon %d KiB after the load > %.0f%% above the %d KiB before", after.AnonKB, 100*c.b.RSSGrowth, before.AnonKB)
	}
	if after.FDs > idle.FDs+c.b.FDSlack {
		c.res.fail("open descriptors (connections and their goroutines) %d after the load, %d idle: not back to the baseline (+%d)", after.FDs, idle.FDs, c.b.FDSlack)
	}
}

// l4AdminWorkers is the number of admin workers of L4 (the rest of the
// 50 clients validate).
const l4AdminWorkers = 5

// rowL4: 45 validate workers alone (the baseline), then the same with 5
// admin workers listing tokens, audit and policies and enrolling tokens.
// No errors, validate p99 ≤ ratio × baseline p99, tokens created = tokens
// listed afterwards.
func (c *catalogue) rowL4(ctx context.Context) error {
	if err := c.setupPW(ctx); err != nil {
		return err
	}
	validators := max(c.cfg.clients-l4AdminWorkers, 1)
	if c.cfg.warmup > 0 {
		c.checkPhase("warm-up", c.validateLoad(ctx, validators, c.cfg.warmup, 0))
	}
	fmt.Fprintf(c.log, "L4: baseline, %d validate workers for %s\n", validators, c.cfg.duration)
	base := c.validateLoad(ctx, validators, c.cfg.duration, 0)
	c.checkPhase("baseline", base)
	fmt.Fprintf(c.log, "L4: mixed, %d validate + %d admin workers for %s\n", validators, l4AdminWorkers, c.cfg.duration)

	var created, adminOps, adminErrs atomic.Int64
	var firstErr atomic.Value
	// latencies per worker and per kind of admin request
	adminLat := make([][4][]time.Duration, l4AdminWorkers)
	end := time.Now().Add(c.cfg.duration)
	var wg sync.WaitGroup
	for w := range l4AdminWorkers {
		wg.Go(func() {
			for i := w; ctx.Err() == nil && time.Now().Before(end); i++ {
				t0 := time.Now()
				var err error
				page := strconv.Itoa(1 + i%5)
				switch i % 4 {
				case 0:
					_, err = c.api.get(ctx, "/token/?page="+page+"&pagesize=10")
				case 1:
					_, err = c.api.get(ctx, "/audit/?page="+page+"&page_size=10")
				case 2:
					_, err = c.api.get(ctx, "/policy/")
				case 3:
					key := make([]byte, keySize)
					_, _ = rand.Read(key)
					_, err = c.api.post(ctx, "/token/init", url.Values{"type": {"hotp"}, "otpkey": {hex.EncodeToString(key)},
						"serial": {fmt.Sprintf("L4T%dN%d", w, i)}, "description": {"L4"}})
					if err == nil {
						created.Add(1)
					}
				}
				if ctx.Err() != nil {
					return
				}
				adminOps.Add(1)
				adminLat[w][i%4] = append(adminLat[w][i%4], time.Since(t0))
				if err != nil {
					adminErrs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	mixed := c.validateLoad(ctx, validators, c.cfg.duration, 0)
	wg.Wait()
	c.checkPhase("mixed", mixed)
	var all []time.Duration
	kinds := []string{"GET /token/", "GET /audit/", "GET /policy/", "POST /token/init"}
	perKind := map[string]latencyMS{}
	for k, name := range kinds {
		var l []time.Duration
		for w := range adminLat {
			l = append(l, adminLat[w][k]...)
		}
		all = append(all, l...)
		st := summarize(l)
		perKind[name] = latencyMS{P50: ms(st.P50), P90: ms(st.P90), P99: ms(st.P99), Max: ms(st.Max), Mean: ms(st.Mean)}
	}
	ast := summarize(all)
	listed, err := c.api.get(ctx, "/token/?serial="+url.QueryEscape("L4T*")+"&pagesize=1")
	if err != nil {
		return fmt.Errorf("listing the L4 tokens: %w", err)
	}
	n, err := count(listed)
	if err != nil {
		return err
	}
	c.set("baseline", base)
	c.set("mixed", mixed)
	c.set("admin", map[string]any{"ops": adminOps.Load(), "errors": adminErrs.Load(), "tokens_created": created.Load(),
		"tokens_listed": n, "latency_ms": latencyMS{P50: ms(ast.P50), P90: ms(ast.P90), P99: ms(ast.P99), Max: ms(ast.Max), Mean: ms(ast.Mean)},
		"latency_ms_by_request": perKind})
	ratio := 0.0
	if base.p99 > 0 {
		ratio = float64(mixed.p99) / float64(base.p99)
	}
	c.set("p99_ratio", round3(ratio))
	if e := adminErrs.Load(); e > 0 {
		c.res.fail("%d of %d admin requests failed (first: %v)", e, adminOps.Load(), firstErr.Load())
	}
	if ratio > c.b.P99Ratio {
		c.res.fail("validate p99 %.3f ms under admin load > %g × the %.3f ms alone", mixed.LatencyMS.P99, c.b.P99Ratio, base.LatencyMS.P99)
	}
	if n != created.Load() {
		c.res.fail("%d tokens created, %d listed afterwards", created.Load(), n)
	}
	if created.Load() == 0 {
		c.res.fail("the admin workers created no token")
	}
	return nil
}

// slowStats counts L7's slow connections.
type slowStats struct {
	mu        sync.Mutex
	opened    int64
	closed    int64 // closed by the server
	late      int64 // closed later than ReadHeaderTimeout + slack, or not at all
	dialErrs  int64
	maxLife   time.Duration
	minLife   time.Duration
	firstLate string
}

func (s *slowStats) add(life time.Duration, closed bool, limit time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if closed {
		s.closed++
	}
	if !closed || life > limit {
		s.late++
		if s.firstLate == "" {
			s.firstLate = fmt.Sprintf("a slow connection lived %s (closed by the server: %t)", life.Round(time.Millisecond), closed)
		}
	}
	s.maxLife = max(s.maxLife, life)
	if s.minLife == 0 || life < s.minLife {
		s.minLife = life
	}
}

// slowConn holds one connection that never finishes its request headers:
// the odd ones trickle a header one byte at a time, the even ones send a
// request line and stop. It returns when the server closes it, or after
// limit×2 (then the connection was not closed in time).
func slowConn(ctx context.Context, addr string, trickle bool, limit time.Duration, st *slowStats) bool {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		st.mu.Lock()
		st.dialErrs++
		st.mu.Unlock()
		return false
	}
	start := time.Now()
	st.mu.Lock()
	st.opened++
	st.mu.Unlock()
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /validate/check HTTP/1.1\r\nHost: "+addr+"\r\n"); err != nil {
		st.add(time.Since(start), true, limit)
		return true
	}
	stop := make(chan struct{})
	if trickle {
		go func() {
			hdr := "X-Slow: " + strings.Repeat("a", 1<<12)
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-t.C:
					if _, err := conn.Write([]byte{hdr[i%len(hdr)]}); err != nil {
						return
					}
				}
			}
		}()
	}
	_ = conn.SetReadDeadline(start.Add(2 * limit))
	_, err = io.Copy(io.Discard, conn) // until the server closes (EOF or reset)
	close(stop)
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	if ctx.Err() != nil && timedOut {
		return false // interrupted: not counted
	}
	st.add(time.Since(start), !timedOut, limit)
	return true
}

// rowL7: L1 alone (the baseline), then L1 with -slow connections that
// never finish their headers. L1 stays free of errors, its p99 ≤ ratio ×
// baseline, and the server closes every slow connection within
// ReadHeaderTimeout + slack.
func (c *catalogue) rowL7(ctx context.Context) error {
	if err := c.setupPW(ctx); err != nil {
		return err
	}
	if c.cfg.warmup > 0 {
		c.checkPhase("warm-up", c.validateLoad(ctx, c.cfg.clients, c.cfg.warmup, 0))
	}
	fmt.Fprintf(c.log, "L7: baseline, %d clients for %s\n", c.cfg.clients, c.cfg.duration)
	base := c.validateLoad(ctx, c.cfg.clients, c.cfg.duration, 0)
	c.checkPhase("baseline", base)
	fmt.Fprintf(c.log, "L7: %d clients with %d slow connections for %s\n", c.cfg.clients, c.cfg.slow, c.cfg.duration)
	limit := c.cfg.readHeaderTimeout + c.b.CloseSlack
	st := &slowStats{}
	end := time.Now().Add(c.cfg.duration)
	var wg sync.WaitGroup
	for i := range c.cfg.slow {
		wg.Go(func() {
			// Spread the first connections over a second, like a client
			// opening them at a rate.
			sleep(ctx, time.Duration(i)*time.Second/time.Duration(max(c.cfg.slow, 1)))
			for ctx.Err() == nil && time.Now().Before(end) {
				if !slowConn(ctx, c.srv.addr, i%2 == 1, limit, st) {
					sleep(ctx, 100*time.Millisecond)
				}
			}
		})
	}
	under := c.validateLoad(ctx, c.cfg.clients, c.cfg.duration, 0)
	wg.Wait()
	c.checkPhase("with slow connections", under)
	ratio := 0.0
	if base.p99 > 0 {
		ratio = float64(under.p99) / float64(base.p99)
	}
	c.set("baseline", base)
	c.set("with_slow", under)
	c.set("p99_ratio", round3(ratio))
	c.set("slow", map[string]any{"connections": st.opened, "closed_by_server": st.closed, "late": st.late,
		"dial_errors": st.dialErrs, "min_life_s": round3(st.minLife.Seconds()), "max_life_s": round3(st.maxLife.Seconds()),
		"read_header_timeout_s": c.cfg.readHeaderTimeout.Seconds(), "limit_s": limit.Seconds()})
	if ratio > c.b.P99Ratio {
		c.res.fail("validate p99 %.3f ms with slow connections > %g × the %.3f ms without", under.LatencyMS.P99, c.b.P99Ratio, base.LatencyMS.P99)
	}
	if c.cfg.slow > 0 && st.opened == 0 {
		c.res.fail("no slow connection was opened (%d dial errors)", st.dialErrs)
	}
	if st.late > 0 {
		c.res.fail("%d of %d slow connections were not closed by the server within %s (%s)", st.late, st.opened, limit, st.firstLate)
	}
	return nil
}

// rowL6: the soak. It measures L1's maximum rate for -probe, then sends
// -rate-share of it for -duration, sampling RSS, descriptors, threads
// and the store's size every -sample into -csv. After -warmup the
// straight line fitted through each series must not rise by more than
// the bounds over the run; L1's properties (only 200s, audit entries =
// requests) hold as well.
func (c *catalogue) rowL6(ctx context.Context) error {
	if err := c.setupPW(ctx); err != nil {
		return err
	}
	idle, err := c.settleIdle(ctx)
	if err != nil {
		return err
	}
	// The probe also opens the clients' connections, which the soak then
	// reuses: opened during the soak they would look like a rise of the
	// server's descriptors.
	fmt.Fprintf(c.log, "L6: measuring the maximum rate for %s\n", c.cfg.probe)
	probe := c.validateLoad(ctx, c.cfg.clients, c.cfg.probe, 0)
	c.checkPhase("probe", probe)
	if probe.PerSecond <= 0 {
		return errors.New("the probe measured no rate")
	}
	rate := c.cfg.rateShare * probe.PerSecond
	if !c.cfg.warmupSet {
		c.cfg.warmup = min(max(c.cfg.duration/5, 10*time.Second), 10*time.Minute)
	}
	c.set("warmup_seconds", c.cfg.warmup.Seconds())
	auditBefore, err := c.validateCount(ctx)
	if err != nil {
		return err
	}
	retain := c.cfg.auditMaxEntries > 0
	var endsBefore auditEnds
	if retain {
		if endsBefore, err = c.auditEnds(ctx); err != nil {
			return err
		}
	}
	var csvW *csv.Writer
	if c.cfg.csv != "" {
		f, err := os.Create(c.cfg.csv)
		if err != nil {
			return err
		}
		defer f.Close()
		csvW = csv.NewWriter(f)
		_ = csvW.Write([]string{"seconds", "rss_kb", "rss_anon_kb", "rss_file_kb", "fds", "threads", "db_bytes"})
	}
	fmt.Fprintf(c.log, "L6: %.1f requests/s (%.0f%% of %.1f) for %s, a sample every %s\n", rate, 100*c.cfg.rateShare, probe.PerSecond, c.cfg.duration, c.cfg.sample)
	var samples []timedSample
	var sampleErr error
	stop := make(chan struct{})
	sampled := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(sampled)
		t := time.NewTicker(c.cfg.sample)
		defer t.Stop()
		for {
			s, err := c.sample()
			if err != nil {
				sampleErr = err
				return
			}
			ts := timedSample{T: time.Since(start).Seconds(), procSample: s}
			samples = append(samples, ts)
			if csvW != nil {
				_ = csvW.Write([]string{strconv.FormatFloat(round3(ts.T), 'f', -1, 64), strconv.FormatInt(s.RSSKB, 10),
					strconv.FormatInt(s.AnonKB, 10), strconv.FormatInt(s.FileKB, 10), strconv.FormatInt(s.FDs, 10), strconv.FormatInt(s.Threads, 10), strconv.FormatInt(s.DBBytes, 10)})
				csvW.Flush()
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	}()
	load := c.validateLoad(ctx, c.cfg.clients, c.cfg.duration, rate)
	close(stop)
	<-sampled
	if sampleErr != nil {
		return fmt.Errorf("sampling /proc: %w", sampleErr)
	}
	c.checkPhase("soak", load)
	after, err := c.settle(ctx, idle.FDs, c.b.FDSlack)
	if err != nil {
		return err
	}
	if retain {
		if err := c.checkRetention(ctx, endsBefore, load.Requests); err != nil {
			return err
		}
	} else {
		got, err := c.waitAudit(ctx, auditBefore+load.Requests)
		if err != nil {
			return err
		}
		c.set("audit_added", got-auditBefore)
		if got-auditBefore != load.Requests {
			c.res.fail("audit: %d validate entries added, %d requests sent", got-auditBefore, load.Requests)
		}
	}
	c.set("probe", probe)
	c.set("rate_target", round3(rate))
	c.set("soak", load)
	c.set("idle", idle)
	c.set("after", after)
	c.set("samples", len(samples))
	var kept []timedSample
	for _, s := range samples {
		if s.T >= c.cfg.warmup.Seconds() {
			kept = append(kept, s)
		}
	}
	if len(kept) < 3 {
		c.res.fail("only %d samples after the warm-up: make -duration longer or -sample shorter", len(kept))
		return nil
	}
	span := kept[len(kept)-1].T - kept[0].T
	rise := func(f func(procSample) int64) (slope, startFit float64) {
		xs, ys := make([]float64, len(kept)), make([]float64, len(kept))
		for i, s := range kept {
			xs[i], ys[i] = s.T, float64(f(s.procSample))
		}
		a, b := fitLine(xs, ys)
		return b, a + b*xs[0]
	}
	rssSlope, rssStart := rise(func(s procSample) int64 { return s.AnonKB })
	totalSlope, _ := rise(func(s procSample) int64 { return s.RSSKB })
	fdSlope, _ := rise(func(s procSample) int64 { return s.FDs })
	thSlope, _ := rise(func(s procSample) int64 { return s.Threads })
	dbSlope, _ := rise(func(s procSample) int64 { return s.DBBytes })
	first, last := kept[0], kept[len(kept)-1]
	perReq := 0.0
	if load.Requests > 0 {
		perReq = float64(last.DBBytes-first.DBBytes) / (float64(load.Requests) * span / load.Seconds)
	}
	c.set("slopes_per_hour", map[string]float64{"rss_anon_kb": round3(rssSlope * 3600), "rss_kb": round3(totalSlope * 3600), "fds": round3(fdSlope * 3600),
		"threads": round3(thSlope * 3600), "db_bytes": round3(dbSlope * 3600)})
	c.set("rise_over_run", map[string]float64{"rss_anon_share": round3(rssSlope * span / rssStart), "rss_kb": round3(totalSlope * span), "fds": round3(fdSlope * span),
		"threads": round3(thSlope * span), "db_bytes": round3(dbSlope * span)})
	c.set("db_bytes_per_request", round3(perReq))
	c.set("span_seconds", round3(span))
	if rssStart > 0 && rssSlope*span/rssStart > c.b.SlopeRSS {
		c.res.fail("RssAnon rises: the fitted line grows by %.1f%% over %.0f s after the warm-up (bound %.0f%%)", 100*rssSlope*span/rssStart, span, 100*c.b.SlopeRSS)
	}
	if fdSlope*span > c.b.SlopeFDs {
		c.res.fail("open descriptors rise by %.1f over %.0f s after the warm-up (bound %g)", fdSlope*span, span, c.b.SlopeFDs)
	}
	if thSlope*span > c.b.SlopeThread {
		c.res.fail("threads rise by %.1f over %.0f s after the warm-up (bound %g)", thSlope*span, span, c.b.SlopeThread)
	}
	// With the retention removing as many entries as arrive, bbolt reuses
	// the freed pages and the file stops growing.
	if dbStart := float64(first.DBBytes); retain && dbStart > 0 && dbSlope*span > c.b.SlopeDB*dbStart {
		c.res.fail("the store's file grows by %.1f%% over %.0f s after the warm-up although the audit retention runs (bound %.0f%%)", 100*dbSlope*span/dbStart, span, 100*c.b.SlopeDB)
	}
	return nil
}

// auditEnds are the audit log's entry count, its oldest and newest
// entry numbers and the newest /validate/ entry's number.
type auditEnds struct {
	Count          int64 `json:"count"`
	Oldest         int64 `json:"oldest"`
	Newest         int64 `json:"newest"`
	NewestValidate int64 `json:"newest_validate"`
}

// auditDriverCalls is how many audited reads of the driver may lie among
// the soak's entries: the count before the soak and auditEnds' three.
const auditDriverCalls = 4

func (c *catalogue) auditEnds(ctx context.Context) (auditEnds, error) {
	var e auditEnds
	first := func(query string) (count, number int64, err error) {
		env, err := c.api.get(ctx, "/audit/?page_size=1"+query)
		if err != nil {
			return 0, 0, fmt.Errorf("reading the audit log: %w", err)
		}
		var v struct {
			Count int64 `json:"count"`
			Data  []struct {
				Number int64 `json:"number"`
			} `json:"auditdata"`
		}
		if err := json.Unmarshal(env.Result.Value, &v); err != nil {
			return 0, 0, fmt.Errorf("reading the audit log: %w", err)
		}
		if len(v.Data) > 0 {
			number = v.Data[0].Number
		}
		return v.Count, number, nil
	}
	var err error
	if e.Count, e.Newest, err = first(""); err != nil {
		return e, err
	}
	if _, e.Oldest, err = first("&sortorder=asc"); err != nil {
		return e, err
	}
	_, e.NewestValidate, err = first("&action=" + url.QueryEscape("*validate*"))
	return e, err
}

// checkRetention checks L6's audit with the retention on: no /validate/
// request of the soak went unaudited, and the retention ran (the log
// holds at most -audit-max-entries once a cleanup interval passed, and
// its oldest entry moved).
//
// Entries are numbered consecutively, so the soak's entries are those
// after the newest /validate/ entry before it: one per request sent, and
// the driver's own audited reads after that entry (auditDriverCalls).
func (c *catalogue) checkRetention(ctx context.Context, before auditEnds, sent int64) error {
	deadline := time.Now().Add(c.cfg.auditCleanup + 10*time.Second)
	var after auditEnds
	for {
		var err error
		if after, err = c.auditEnds(ctx); err != nil {
			return err
		}
		done := after.NewestValidate-before.NewestValidate >= sent && after.Count <= c.cfg.auditMaxEntries
		if done || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	written := after.NewestValidate - before.NewestValidate
	c.set("audit_before", before)
	c.set("audit_after", after)
	c.set("audit_soak_entries", written)
	c.set("audit_max_entries", c.cfg.auditMaxEntries)
	if written != sent+auditDriverCalls {
		c.res.fail("audit: %d entries for the soak's %d requests and the driver's %d reads", written, sent, auditDriverCalls)
	}
	if after.Newest <= c.cfg.auditMaxEntries {
		c.res.fail("audit rotation: only %d entries written, not more than -audit-max-entries %d: the retention had nothing to remove (lower -audit-max-entries or make the soak longer)", after.Newest, c.cfg.auditMaxEntries)
		return nil
	}
	if after.Count > c.cfg.auditMaxEntries {
		c.res.fail("audit rotation did not run: %d entries %s after the soak, -audit-max-entries %d", after.Count, c.cfg.auditCleanup, c.cfg.auditMaxEntries)
	}
	if after.Oldest <= before.Oldest {
		c.res.fail("audit rotation did not run: the oldest entry is still number %d", after.Oldest)
	}
	return nil
}

// timedSample is a /proc sample T seconds after the soak started.
type timedSample struct {
	T float64 `json:"t"`
	procSample
}

// fitLine is the least-squares line y = a + b·x.
func fitLine(xs, ys []float64) (a, b float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return sy / n, 0
	}
	b = (n*sxy - sx*sy) / den
	a = (sy - b*sx) / n
	return a, b
}
