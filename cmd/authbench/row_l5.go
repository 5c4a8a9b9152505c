package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	smtpd "github.com/emersion/go-smtp"
)

// mailSink is an SMTP server on loopback that hands every message to the
// channel of its recipient.
type mailSink struct {
	port int
	srv  *smtpd.Server
	done chan struct{}

	mu    sync.Mutex
	boxes map[string]chan string // recipient -> message bodies
	total atomic.Int64
}

func newMailSink() (*mailSink, error) {
	k := &mailSink{boxes: map[string]chan string{}, done: make(chan struct{})}
	k.srv = smtpd.NewServer(smtpd.BackendFunc(func(*smtpd.Conn) (smtpd.Session, error) { return &mailSession{k: k}, nil }))
	k.srv.Domain = "sink.catalogue"
	k.srv.ReadTimeout, k.srv.WriteTimeout = 10*time.Second, 10*time.Second
	k.srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k.port = l.Addr().(*net.TCPAddr).Port
	go func() { defer close(k.done); _ = k.srv.Serve(l) }()
	return k, nil
}

func (k *mailSink) close() { _ = k.srv.Close(); <-k.done }

// box is rcpt's channel (created on first use).
func (k *mailSink) box(rcpt string) chan string {
	k.mu.Lock()
	defer k.mu.Unlock()
	rcpt = strings.ToLower(strings.Trim(rcpt, "<>"))
	b := k.boxes[rcpt]
	if b == nil {
		b = make(chan string, 64)
		k.boxes[rcpt] = b
	}
	return b
}

type mailSession struct {
	k  *mailSink
	to []string
}

func (s *mailSession) Mail(string, *smtpd.MailOptions) error { return nil }
func (s *mailSession) Rcpt(to string, _ *smtpd.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *mailSession) Reset()        { s.to = nil }
func (s *mailSession) Logout() error { return nil }
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return err
	}
	s.k.total.Add(1)
	for _, to := range s.to {
		select {
		case s.k.box(to) <- string(b):
		default: // a full box: the worker will miss it and fail
		}
	}
	return nil
}

// mailCodeRe finds the OTP in a mail's body.
var mailCodeRe = regexp.MustCompile(`\b\d{6}\b`)

// mailCode is the six-digit code in the body of a raw message (after the
// headers, so a date or message id cannot match).
func mailCode(raw string) string {
	body := raw
	if _, b, ok := strings.Cut(raw, "\r\n\r\n"); ok {
		body = b
	} else if _, b, ok := strings.Cut(raw, "\n\n"); ok {
		body = b
	}
	return mailCodeRe.FindString(body)
}

// l5Counts are L5's counters.
type l5Counts struct {
	challenges, firstOK, firstFailed, secondAccepted, secondRejected, noMail, errors atomic.Int64
	firstErr                                                                         atomic.Value
}

func (n *l5Counts) fail(err string) {
	n.errors.Add(1)
	n.firstErr.CompareAndSwap(nil, err)
}

// rowL5: e-mail challenge-response under load. Each worker owns a user
// with an e-mail token; it triggers a challenge, reads the code from the
// sink, answers it (must succeed) and answers it again (must fail). Mails
// received = challenges created.
func (c *catalogue) rowL5(ctx context.Context) error {
	sink, err := newMailSink()
	if err != nil {
		return fmt.Errorf("SMTP sink: %w", err)
	}
	defer sink.close()
	if _, err := c.api.post(ctx, "/smtpserver/cat_mail", url.Values{"server": {"127.0.0.1"}, "port": {strconv.Itoa(sink.port)},
		"sender": {"authsrv@example.org"}, "tls": {"0"}, "timeout": {"10"}}); err != nil {
		return fmt.Errorf("configuring the SMTP server: %w", err)
	}
	workers := c.cfg.l5Workers
	logins := make([]string, workers)
	for i := range logins {
		logins[i] = fmt.Sprintf("mail%d", i+1)
	}
	if err := c.writeUsers(ctx, logins); err != nil {
		return err
	}
	for i, l := range logins {
		if _, err := c.api.post(ctx, "/token/init", url.Values{"type": {"email"}, "serial": {fmt.Sprintf("L5E%d", i+1)},
			"email": {l + "@example.org"}, "email.identifier": {"cat_mail"}, "user": {l}, "realm": {c.realm}}); err != nil {
			return fmt.Errorf("enrolling the e-mail token of %s: %w", l, err)
		}
	}
	fmt.Fprintf(c.log, "L5: %d workers for %s, SMTP sink on 127.0.0.1:%d\n", workers, c.cfg.duration, sink.port)
	n := &l5Counts{}
	var lat sync.Mutex
	var rounds []time.Duration
	end := time.Now().Add(c.cfg.duration)
	var wg sync.WaitGroup
	for _, l := range logins {
		box := sink.box(l + "@example.org")
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				t0 := time.Now()
				if !c.l5Round(ctx, l, box, n) {
					sleep(ctx, 50*time.Millisecond)
					continue
				}
				lat.Lock()
				rounds = append(rounds, time.Since(t0))
				lat.Unlock()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	sleep(ctx, 500*time.Millisecond) // a mail still on its way is counted too
	st := summarize(rounds)
	mails := sink.total.Load()
	left := int64(-1)
	if env, err := c.api.get(ctx, "/token/challenges/?pagesize=1"); err == nil {
		if v, err := count(env); err == nil {
			left = v
		}
	}
	c.set("challenges", n.challenges.Load())
	c.set("mails", mails)
	c.set("first_answers_accepted", n.firstOK.Load())
	c.set("first_answers_refused", n.firstFailed.Load())
	c.set("second_answers_accepted", n.secondAccepted.Load())
	c.set("second_answers_refused", n.secondRejected.Load())
	c.set("challenges_without_mail", n.noMail.Load())
	c.set("errors", n.errors.Load())
	c.set("challenges_left", left)
	c.set("round_ms", latencyMS{P50: ms(st.P50), P90: ms(st.P90), P99: ms(st.P99), Max: ms(st.Max), Mean: ms(st.Mean)})
	if d := c.cfg.duration.Seconds(); d > 0 {
		c.set("rounds_per_second", round3(float64(len(rounds))/d))
	}
	if e := n.errors.Load(); e > 0 {
		c.res.fail("%d requests failed (first: %v)", e, n.firstErr.Load())
	}
	if n.challenges.Load() == 0 {
		c.res.fail("no challenge was created")
	}
	if mails != n.challenges.Load() {
		c.res.fail("%d mails for %d challenges", mails, n.challenges.Load())
	}
	if n.noMail.Load() > 0 {
		c.res.fail("%d challenges got no mail with a code within 10 s", n.noMail.Load())
	}
	if f := n.firstFailed.Load(); f > 0 {
		c.res.fail("%d first answers with the mailed code were refused", f)
	}
	if a := n.secondAccepted.Load(); a > 0 {
		c.res.fail("%d second answers with the same code were accepted: a challenge succeeded twice", a)
	}
	if n.firstOK.Load() != n.secondRejected.Load() {
		c.res.fail("%d answers accepted, %d repeats refused: each success must be refused once after", n.firstOK.Load(), n.secondRejected.Load())
	}
	return nil
}

// l5Round is one challenge: trigger, read the mail, answer twice. It
// reports whether the round ran to its end.
func (c *catalogue) l5Round(ctx context.Context, login string, box chan string, n *l5Counts) bool {
	env, err := c.api.post(ctx, "/validate/triggerchallenge", url.Values{"user": {login}, "realm": {c.realm}})
	if err != nil {
		if ctx.Err() == nil {
			n.fail("triggerchallenge: " + err.Error())
		}
		return false
	}
	var trig struct {
		Detail struct {
			TransactionID string `json:"transaction_id"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(env.raw, &trig); err != nil || trig.Detail.TransactionID == "" || string(env.Result.Value) != "1" {
		n.fail("triggerchallenge: no single challenge with a transaction_id: value " + snippet(env.Result.Value))
		return false
	}
	n.challenges.Add(1)
	var code string
	select {
	case m := <-box:
		code = mailCode(m)
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
		return false
	}
	if code == "" {
		n.noMail.Add(1)
		return false
	}
	answer := url.Values{"user": {login}, "realm": {c.realm}, "transaction_id": {trig.Detail.TransactionID}, "pass": {code}}
	for i := range 2 {
		env, err := c.api.post(ctx, "/validate/check", answer)
		if err != nil {
			if ctx.Err() == nil {
				n.fail("answer: " + err.Error())
			}
			return false
		}
		ok := string(env.Result.Value) == "true"
		switch {
		case i == 0 && ok:
			n.firstOK.Add(1)
		case i == 0:
			n.firstFailed.Add(1)
		case ok:
			n.secondAccepted.Add(1)
		default:
			n.secondRejected.Add(1)
		}
	}
	return true
}
