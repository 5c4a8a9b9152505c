package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// outcome classifies one /validate/check request.
type outcome int

const (
	outOK        outcome = iota // the expected result.value
	outStatus                   // HTTP status, envelope or result.status wrong
	outTransport                // no complete answer (connection, timeout)
	outValue                    // result.value not the expected one
	outCancelled                // the run was interrupted: not counted
)

// tally counts one client's requests; merged after the load.
type tally struct {
	requests, ok, status, transport, value int64
	lat                                    []time.Duration
	samples                                [3]string // first message per error class
}

func (t *tally) record(o outcome, lat time.Duration, msg string) {
	t.requests++
	t.lat = append(t.lat, lat)
	slot := -1
	switch o {
	case outOK:
		t.ok++
	case outStatus:
		t.status++
		slot = 0
	case outTransport:
		t.transport++
		slot = 1
	case outValue:
		t.value++
		slot = 2
	}
	if slot >= 0 && t.samples[slot] == "" {
		t.samples[slot] = []string{"status: ", "transport: ", "unexpected value: "}[slot] + msg
	}
}

func (t *tally) merge(o *tally) {
	t.requests += o.requests
	t.ok += o.ok
	t.status += o.status
	t.transport += o.transport
	t.value += o.value
	t.lat = append(t.lat, o.lat...)
	for i, s := range o.samples {
		if t.samples[i] == "" {
			t.samples[i] = s
		}
	}
}

// transportBackoff is the pause after a transport error, so a dead server
// does not turn the load into a busy loop of refused connections.
const transportBackoff = 10 * time.Millisecond

// load runs clients goroutines for d, each owning the users i with
// i%clients == its number, round robin. It returns the merged tally and
// the time from the start until the last client stopped. A cancelled ctx
// stops the clients early; requests it cut short are not counted.
func (b *bench) load(ctx context.Context, users []*benchUser, clients int, d time.Duration) (*tally, time.Duration) {
	return runClients(ctx, users, clients, d, b.client)
}

// runClients runs clients goroutines of client for d, each owning the
// users i with i%clients == its number, and merges their tallies; the
// load of every protocol (HTTP, RADIUS) runs through it.
func runClients(ctx context.Context, users []*benchUser, clients int, d time.Duration,
	client func(ctx context.Context, own []*benchUser, end time.Time, t *tally)) (*tally, time.Duration) {
	tallies := make([]tally, clients)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w := range clients {
		var own []*benchUser
		for i := w; i < len(users); i += clients {
			own = append(own, users[i])
		}
		// Room for the expected number of requests at ~1 ms each.
		tallies[w].lat = make([]time.Duration, 0, min(int(d/time.Millisecond)+16, 1<<20))
		wg.Go(func() { client(ctx, own, end, &tallies[w]) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := &tally{lat: make([]time.Duration, 0, totalRequests(tallies))}
	for i := range tallies {
		total.merge(&tallies[i])
	}
	return total, elapsed
}

func totalRequests(ts []tally) int {
	n := 0
	for i := range ts {
		n += len(ts[i].lat)
	}
	return n
}

// client is one load goroutine. It sends one request at a time, cycling
// through its users, until end or until ctx is cancelled.
func (b *bench) client(ctx context.Context, users []*benchUser, end time.Time, t *tally) {
	for _, u := range users {
		u.gen = newHOTP(u.Key, otpDigits)
		if b.cfg.mode == modeWrong {
			u.wrong = wrongOTP(u.gen, u.Counter)
		}
	}
	for i := 0; ctx.Err() == nil && time.Now().Before(end); i++ {
		u := users[i%len(users)]
		pass := b.pass(u)
		t0 := time.Now()
		o, msg := b.check(ctx, b.nodes[i%len(b.nodes)], u, pass)
		lat := time.Since(t0)
		// Advance unless the server said no (then it kept its counter):
		// after a transport error, a bad status or an interrupt it may
		// have used the value, and its window of 10 covers a skip. Mode
		// wrong never moves the server's counter.
		if b.cfg.mode != modeWrong && o != outValue {
			u.Counter++
		}
		if o == outCancelled {
			return
		}
		t.record(o, lat, msg)
		if o == outTransport {
			sleep(ctx, min(transportBackoff, time.Until(end)))
		}
	}
}

// pass is the pass parameter for u's next request: PIN + OTP.
func (b *bench) pass(u *benchUser) string {
	switch b.cfg.mode {
	case modeWrong:
		return b.cfg.pin + u.wrong
	case modePIN:
		return b.cfg.pin + u.gen.At(u.Counter)
	default:
		return u.gen.At(u.Counter)
	}
}

// wrongOTP returns an OTP value that is not valid anywhere near counter:
// not in the server's window from any counter between counter-100 and
// counter (the driver's counter may run ahead of the server's after
// transport errors), so mode wrong can never be accepted.
func wrongOTP(g *hotpGen, counter uint64) string {
	const behind, window = 100, 10
	forbidden := map[string]bool{}
	from := uint64(0)
	if counter > behind {
		from = counter - behind
	}
	for c := from; c < counter+window; c++ {
		forbidden[g.At(c)] = true
	}
	v, _ := strconv.Atoi(g.At(counter))
	mod := 1
	for range g.digits {
		mod *= 10
	}
	for k := 0; ; k++ {
		cand := fmt.Sprintf("%0*d", g.digits, (v+mod/2+k)%mod)
		if !forbidden[cand] {
			return cand
		}
	}
}

// checkAnswer is the part of a /validate/check answer the driver reads
// beyond the envelope.
type checkAnswer struct {
	Detail struct {
		Message string `json:"message"`
	} `json:"detail"`
}

// check sends one POST /validate/check to base and classifies the answer. The
// message describes a failure without the pass.
func (b *bench) check(ctx context.Context, base string, u *benchUser, pass string) (outcome, string) {
	form := encodeForm(url.Values{"user": {u.Login}, "realm": {b.cfg.realm}, "pass": {pass}})
	return postCheck(ctx, b.hc, b.cfg.timeout, base, form, b.cfg.mode != modeWrong)
}

// postCheck sends one /validate/check with form to base, within timeout,
// and classifies the answer against the result.value wanted. A request
// cut by the end of ctx (not of its own timeout) is outCancelled.
func postCheck(ctx context.Context, hc *http.Client, timeout time.Duration, base, form string, want bool) (outcome, string) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, base+"/validate/check", strings.NewReader(form))
	if err != nil {
		return outTransport, err.Error()
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", userAgent)
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return outCancelled, ""
		}
		return outTransport, err.Error()
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if err != nil {
		if ctx.Err() != nil {
			return outCancelled, ""
		}
		return outTransport, "reading the answer: " + err.Error()
	}
	return classify(resp.StatusCode, body, want)
}

// classify judges an answer: HTTP 200, status true and result.value equal
// to want is a success.
func classify(status int, body []byte, want bool) (outcome, string) {
	env, err := decodeEnvelope(status, body)
	if err != nil {
		return outStatus, err.Error()
	}
	var got bool
	switch v := string(bytes.TrimSpace(env.Result.Value)); v {
	case "true":
		got = true
	case "false":
		got = false
	default:
		return outValue, "result.value is " + snippet([]byte(v)) + ", want " + strconv.FormatBool(want)
	}
	if got == want {
		return outOK, ""
	}
	var a checkAnswer
	_ = json.Unmarshal(body, &a)
	msg := fmt.Sprintf("result.value %t, want %t", got, want)
	if a.Detail.Message != "" {
		msg += " (" + a.Detail.Message + ")"
	}
	return outValue, msg
}

// sleep waits for d or until ctx is cancelled.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
