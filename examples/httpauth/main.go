// Command httpauth protects a web application with user + PIN + OTP on
// the authsrv library alone (no authsrv server): HTTP Basic or a login
// form, the e-mail token's challenge in a second step of the form, then a
// session cookie. It serves a demo on loopback until interrupted, or with
// -selftest sends itself a sequence of requests and prints the answers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/token"
)

// key is alice's HOTP key, the one of RFC 4226's test vectors, so that
// an authenticator app or oathtool can make its OTPs (see README.md).
var key = []byte("12345678901234567890")

func main() {
	listen := flag.String("listen", os.Getenv("HTTPAUTH_LISTEN"), "loopback address to serve on (default 127.0.0.1:8080, with -selftest a free port; env HTTPAUTH_LISTEN)")
	selftest := flag.Bool("selftest", false, "send the demo requests to itself, print the answers and exit (1 when one differs)")
	flag.Parse()
	if *listen == "" {
		*listen = "127.0.0.1:8080"
		if *selftest {
			*listen = "127.0.0.1:0"
		}
	}
	if err := run(*listen, *selftest); err != nil {
		fmt.Fprintln(os.Stderr, "httpauth:", err)
		os.Exit(1)
	}
}

func run(listen string, selftest bool) error {
	if host, _, err := net.SplitHostPort(listen); err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("listen address %q: want a loopback address and port", listen)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "authsrv-httpauth")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	opts := []authsrv.Option{authsrv.WithDataDir(dir)}
	smtp := os.Getenv("HTTPAUTH_SMTP")
	if host, _, err := net.SplitHostPort(smtp); err == nil {
		// authsrv dials no loopback or private address unless allowed.
		if dial, err := netguard.Parse(host); err == nil {
			opts = append(opts, authsrv.WithDialPolicy(dial))
		}
	}
	s, err := authsrv.New(opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := setup(ctx, s, dir, smtp); err != nil {
		return err
	}
	go func() { _ = s.Run(ctx) }()

	auth := NewAuth(s.Validator(), "example")
	auth.Log = log.New(os.Stderr, "", log.LstdFlags)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s\n", User(r.Context()))
	})
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: auth.Wrap(app), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	base := "http://" + l.Addr().String()
	if selftest {
		if err := runSelftest(base); err != nil {
			return err
		}
		return printRecords(ctx, s)
	}
	fmt.Println("listening on", base)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// setup makes the users alice (HOTP token, PIN 1234) and bob (e-mail
// token, PIN 5678, when HTTPAUTH_SMTP names an SMTP server host:port; the
// mail goes to HTTPAUTH_EMAIL, default bob@example.org). The policy
// challenge_response=hotp lets alice log in in two steps too: the PIN,
// then the OTP.
func setup(ctx context.Context, s *authsrv.Server, dir, smtp string) error {
	local, passwd := caller.Caller{}, filepath.Join(dir, "passwd")
	users := "alice:x:1000:1000:Alice:/home/alice:/bin/sh\nbob:x:1001:1001:Bob:/home/bob:/bin/sh\n"
	if err := os.WriteFile(passwd, []byte(users), 0o600); err != nil {
		return err
	}
	ops := s.Ops()
	if _, err := ops.SetResolver(ctx, local, "local", map[string]string{"type": "passwdresolver", "fileName": passwd}); err != nil {
		return err
	}
	if _, _, err := ops.SetRealm(ctx, local, "example", []realm.Entry{{Name: "local"}}); err != nil {
		return err
	}
	if _, err := ops.InitToken(ctx, local, authsrv.TokenInit{Type: "hotp", Serial: "HOTP0001", User: authsrv.Target{User: "alice", Realm: "example"},
		Params: token.Params{"otpkey": fmt.Sprintf("%x", key), "pin": "1234"}}); err != nil {
		return err
	}
	if _, err := ops.SetPolicy(ctx, local, policy.Policy{Name: "challenge", Scope: policy.ScopeAuthentication, Action: "challenge_response=hotp",
		Active: true, Priority: 1}); err != nil {
		return err
	}
	if smtp == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(smtp)
	if err != nil {
		return fmt.Errorf("HTTPAUTH_SMTP: %w", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("HTTPAUTH_SMTP: port %q", port)
	}
	if err := ops.SetSMTPServer(ctx, local, notify.SMTPServer{Identifier: "mail", Server: host, Port: n, Sender: "authsrv@example.org", Timeout: 10}); err != nil {
		return err
	}
	to := os.Getenv("HTTPAUTH_EMAIL")
	if to == "" {
		to = "bob@example.org"
	}
	_, err = ops.InitToken(ctx, local, authsrv.TokenInit{Type: "email", Serial: "EMAIL0001", User: authsrv.Target{User: "bob", Realm: "example"},
		Params: token.Params{"genkey": "1", "pin": "5678", "email": to, token.EmailIdentifier: "mail"}})
	return err
}

// runSelftest sends the demo requests and prints one line each: what was
// asked and what came back.
func runSelftest(base string) error {
	client := &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// do sends a request with the cookies given and returns the status,
	// the body (or the redirect's target) and the cookies set.
	do := func(method, path string, form url.Values, set func(*http.Request), cookies ...*http.Cookie) (int, string, map[string]*http.Cookie) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			return 0, err.Error(), nil
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if set != nil {
			set(req)
		}
		for _, c := range cookies {
			if c != nil {
				req.AddCookie(c)
			}
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, err.Error(), nil
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
		first := strings.TrimSpace(string(b))
		if loc := res.Header.Get("Location"); loc != "" {
			first = "-> " + loc
		}
		set1 := map[string]*http.Cookie{}
		for _, c := range res.Cookies() {
			set1[c.Name] = c
		}
		return res.StatusCode, first, set1
	}
	basic := func(pass string) func(*http.Request) { return func(r *http.Request) { r.SetBasicAuth("alice", pass) } }
	hotp := func(counter uint64) string { return otp.HOTP(key, counter, 6, otp.SHA1) }
	var failed []string
	step := func(name string, got, want string) {
		fmt.Printf("%s: %s\n", name, got)
		if got != want {
			failed = append(failed, fmt.Sprintf("%s: got %q, want %q", name, got, want))
		}
	}
	show := func(code int, body string) string {
		first, _, _ := strings.Cut(body, "\n")
		return fmt.Sprintf("%d %s", code, first)
	}

	code, line, _ := do("GET", "/", nil, nil)
	step("no credentials", show(code, line), "401 authentication required: HTTP Basic with PIN+OTP as password, or the form at /login")
	code, line, _ = do("GET", "/report", nil, func(r *http.Request) { r.Header.Set("Accept", "text/html") })
	step("browser without session", show(code, line), "303 -> /login?next=%2Freport")
	code, line, set := do("GET", "/", nil, basic("1234"+hotp(0)))
	step("Basic PIN+OTP", show(code, line), "200 hello alice")
	ck := set[sessionCookie]
	step("session cookie", cookieFlags(ck), "HttpOnly SameSite=Strict")
	code, line, _ = do("GET", "/", nil, nil, ck)
	step("with the cookie", show(code, line), "200 hello alice")
	code, _, _ = do("GET", "/", nil, basic("1234"+hotp(0)))
	step("Basic, the same OTP again", strconv.Itoa(code), "401")
	code, _, _ = do("GET", "/", nil, basic("1234000000"))
	step("Basic, wrong OTP", strconv.Itoa(code), "401")
	code, _, _ = do("GET", "/", nil, basic("0000"+hotp(1)))
	step("Basic, wrong PIN", strconv.Itoa(code), "401")
	code, _, _ = do("GET", "/", nil, nil, &http.Cookie{Name: sessionCookie, Value: "forged"})
	step("forged cookie", strconv.Itoa(code), "401")

	code, line, set = do("POST", "/login", url.Values{"user": {"alice"}, "password": {"1234" + hotp(1)}, "next": {"/report"}}, nil)
	step("form PIN+OTP", show(code, line), "303 -> /report")
	code, line, _ = do("GET", "/report", nil, nil, set[sessionCookie])
	step("with its cookie", show(code, line), "200 hello alice")
	code, _, _ = do("POST", "/login", url.Values{"user": {"alice"}, "password": {"1234000000"}}, nil)
	step("form, wrong OTP", strconv.Itoa(code), "401")

	code, body, set := do("POST", "/login", url.Values{"user": {"alice"}, "password": {"1234"}}, nil)
	chal := set[challengeCookie]
	step("form PIN alone", fmt.Sprintf("%d challenge cookie %s, shows %q: %t", code, cookieFlags(chal), "please enter otp:", strings.Contains(body, "please enter otp:")),
		`200 challenge cookie HttpOnly SameSite=Strict, shows "please enter otp:": true`)
	code, _, _ = do("POST", "/login", url.Values{"otp": {"000000"}}, nil, chal)
	step("form, wrong answer", strconv.Itoa(code), "401")
	code, _, _ = do("POST", "/login", url.Values{"otp": {hotp(2)}}, nil)
	step("form, answer without the challenge cookie", strconv.Itoa(code), "401")
	code, line, set = do("POST", "/login", url.Values{"otp": {hotp(2)}}, nil, chal)
	step("form, right answer", show(code, line), "303 -> /")
	ck = set[sessionCookie]
	code, _, _ = do("POST", "/login", url.Values{"otp": {hotp(3)}}, nil, chal)
	step("challenge answered twice", strconv.Itoa(code), "401")
	code, line, _ = do("GET", "/", nil, nil, ck)
	step("with its cookie", show(code, line), "200 hello alice")
	code, line, _ = do("POST", "/logout", nil, nil, ck)
	step("logout", show(code, line), "303 -> /login")
	code, _, _ = do("GET", "/", nil, nil, ck)
	step("the cookie after logout", strconv.Itoa(code), "401")
	if failed != nil {
		return errors.New("selftest failed:\n" + strings.Join(failed, "\n"))
	}
	return nil
}

// printRecords shows that the checks went through authsrv's audit and
// client applications with the caller the middleware gave.
func printRecords(ctx context.Context, s *authsrv.Server) error {
	res, err := s.Ops().SearchAudit(ctx, caller.Caller{}, audit.Query{Filters: map[string]string{"action": "httpauth *"}, PageSize: 100})
	if err != nil {
		return err
	}
	seen, accepted := map[string]bool{}, 0
	for _, r := range res.Rows {
		seen[fmt.Sprintf("%v by %v", r["client"], r["user_agent"])] = true
		if r["success"] == 1 {
			accepted++
		}
	}
	fmt.Printf("audit: %d checks, %d accepted, from %v\n", len(res.Rows), accepted, slices.Sorted(maps.Keys(seen)))
	apps, err := s.Ops().ClientApps(ctx, caller.Caller{})
	if err != nil {
		return err
	}
	for _, a := range apps["authsrv-httpauth"] {
		fmt.Println("client application: authsrv-httpauth at", a.IP)
	}
	return nil
}

// cookieFlags shows the security attributes of c.
func cookieFlags(c *http.Cookie) string {
	if c == nil || c.Value == "" {
		return "missing"
	}
	var f []string
	if c.HttpOnly {
		f = append(f, "HttpOnly")
	}
	if c.Secure {
		f = append(f, "Secure")
	}
	if c.SameSite == http.SameSiteStrictMode {
		f = append(f, "SameSite=Strict")
	}
	return strings.Join(f, " ")
}
