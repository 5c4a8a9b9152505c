package authsrv_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/otp"
)

// buildExample builds examples/<name> into a temporary directory.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/"+name).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestExampleHTTPAuth builds examples/httpauth and runs its selftest (HTTP
// Basic with PIN+OTP, the session cookie, a used or wrong OTP refused, the
// login form and its challenge step, logout, and the checks in the audit
// and client applications), then serves it with an SMTP sink as its mail
// server and logs bob in with his e-mail token's challenge, the OTP read
// from the mail.
func TestExampleHTTPAuth(t *testing.T) {
	bin := buildExample(t, "httpauth")
	key := []byte("12345678901234567890")
	var otps []string
	for i := range 4 {
		otps = append(otps, otp.HOTP(key, uint64(i), 6, otp.SHA1))
	}

	t.Run("Selftest", func(t *testing.T) {
		cmd := exec.Command(bin, "-selftest")
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "HTTPAUTH_LISTEN=", "HTTPAUTH_SMTP=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("examples/httpauth -selftest: %v\n%s", err, out)
		}
		want := `no credentials: 401 authentication required: HTTP Basic with PIN+OTP as password, or the form at /login
browser without session: 303 -> /login?next=%2Freport
Basic PIN+OTP: 200 hello alice
session cookie: HttpOnly SameSite=Strict
with the cookie: 200 hello alice
Basic, the same OTP again: 401
Basic, wrong OTP: 401
Basic, wrong PIN: 401
forged cookie: 401
form PIN+OTP: 303 -> /report
with its cookie: 200 hello alice
form, wrong OTP: 401
form PIN alone: 200 challenge cookie HttpOnly SameSite=Strict, shows "please enter otp:": true
form, wrong answer: 401
form, answer without the challenge cookie: 401
form, right answer: 303 -> /
challenge answered twice: 401
with its cookie: 200 hello alice
logout: 303 -> /login
the cookie after logout: 401
audit: 9 checks, 3 accepted, from [127.0.0.1 by authsrv-httpauth]
client application: authsrv-httpauth at 127.0.0.1
`
		if string(out) != want {
			t.Errorf("examples/httpauth -selftest printed\n%s\nwant\n%s", out, want)
		}
		for _, code := range otps {
			if strings.Contains(string(out), code) {
				t.Errorf("the output shows the OTP %s", code)
			}
		}
	})

	t.Run("EmailChallenge", func(t *testing.T) {
		sink := testsvc.NewSMTPSink(t)
		cmd := exec.Command(bin, "-listen", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "HTTPAUTH_SMTP="+sink.Addr, "HTTPAUTH_EMAIL=bob@example.org")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var (
			outMu sync.Mutex
			out   strings.Builder
		)
		ready := make(chan string, 1)
		scanned := make(chan struct{})
		go func() {
			defer close(scanned)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				outMu.Lock()
				out.WriteString(sc.Text() + "\n")
				outMu.Unlock()
				if base, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
					ready <- base
				}
			}
		}()
		exited := false
		stop := func() {
			if exited {
				return
			}
			exited = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-scanned
			if err := cmd.Wait(); err != nil {
				t.Errorf("examples/httpauth: %v\n%s", err, stderr.String())
			}
		}
		t.Cleanup(stop)
		var base string
		select {
		case base = <-ready:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("examples/httpauth did not say where it listens\n%s", stderr.String())
		}

		client := &http.Client{Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		type answer struct {
			status  int
			body    string
			header  http.Header
			cookies map[string]*http.Cookie
		}
		send := func(method, path string, form url.Values, set func(*http.Request), cookies ...*http.Cookie) answer {
			t.Helper()
			var body io.Reader
			if form != nil {
				body = strings.NewReader(form.Encode())
			}
			req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
			if err != nil {
				t.Fatal(err)
			}
			if form != nil {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			if set != nil {
				set(req)
			}
			for _, c := range cookies {
				req.AddCookie(c)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			a := answer{status: res.StatusCode, body: string(b), header: res.Header, cookies: map[string]*http.Cookie{}}
			for _, c := range res.Cookies() {
				a.cookies[c.Name] = c
			}
			return a
		}
		// The transaction id (20 digits) stays in the example: neither
		// the page nor a header nor a URL carries it.
		txid := regexp.MustCompile(`\d{20}`)
		noTxID := func(step string, a answer) {
			t.Helper()
			for k, v := range a.header {
				if txid.MatchString(strings.Join(v, " ")) {
					t.Errorf("%s: header %s carries a transaction id: %v", step, k, v)
				}
			}
			if txid.MatchString(a.body) {
				t.Errorf("%s: the page carries a transaction id:\n%s", step, a.body)
			}
		}
		otpLine := regexp.MustCompile(`(?m)^(\d{6})\r?$`)
		mailOTP := func(n int) string {
			t.Helper()
			msgs := sink.Messages()
			if len(msgs) != n || len(msgs[n-1].To) != 1 || msgs[n-1].To[0] != "bob@example.org" {
				t.Fatalf("want %d mails to bob@example.org, got %+v", n, msgs)
			}
			m := otpLine.FindStringSubmatch(msgs[n-1].Data)
			if m == nil {
				t.Fatalf("no OTP in the mail:\n%s", msgs[n-1].Data)
			}
			return m[1]
		}
		wrong := func(code string) string {
			if code == "000000" {
				return "111111"
			}
			return "000000"
		}
		var seen []string

		// The form: the PIN alone sends the mail and asks for its OTP.
		a := send("POST", "/login", url.Values{"user": {"bob"}, "password": {"5678"}}, nil)
		chal := a.cookies["httpauth_challenge"]
		if a.status != http.StatusOK || !strings.Contains(a.body, "Enter the OTP from the Email") || !strings.Contains(a.body, `name="otp"`) || chal == nil {
			t.Fatalf("PIN alone: %d %v\n%s", a.status, a.cookies, a.body)
		}
		if !chal.HttpOnly || chal.SameSite != http.SameSiteStrictMode || chal.Secure {
			t.Errorf("challenge cookie %+v: want HttpOnly, SameSite=Strict, not Secure without TLS", chal)
		}
		noTxID("PIN alone", a)
		code := mailOTP(1)
		seen = append(seen, code)
		if a := send("POST", "/login", url.Values{"otp": {wrong(code)}}, nil, chal); a.status != http.StatusUnauthorized || !strings.Contains(a.body, "Wrong OTP.") {
			t.Errorf("wrong answer: %d\n%s", a.status, a.body)
		}
		a = send("POST", "/login", url.Values{"otp": {code}}, nil, chal)
		sess := a.cookies["httpauth_session"]
		if a.status != http.StatusSeeOther || a.header.Get("Location") != "/" || sess == nil {
			t.Fatalf("right answer: %d %v\n%s", a.status, a.header, a.body)
		}
		noTxID("right answer", a)
		if a := send("GET", "/", nil, nil, sess); a.status != http.StatusOK || a.body != "hello bob\n" {
			t.Errorf("with the session: %d %q", a.status, a.body)
		}
		// The mail's OTP is used up, in one step as in two.
		if a := send("GET", "/", nil, func(r *http.Request) { r.SetBasicAuth("bob", "5678"+code) }); a.status != http.StatusUnauthorized {
			t.Errorf("the used OTP with Basic: %d %q", a.status, a.body)
		}
		if a := send("POST", "/login", url.Values{"otp": {code}}, nil, chal); a.status != http.StatusUnauthorized {
			t.Errorf("the answered challenge again: %d %q", a.status, a.body)
		}

		// Basic with the PIN alone sends a mail too; its challenge is
		// answered in the form the cookie leads to.
		a = send("GET", "/report", nil, func(r *http.Request) { r.SetBasicAuth("bob", "5678") })
		chal = a.cookies["httpauth_challenge"]
		if a.status != http.StatusUnauthorized || !strings.Contains(a.body, "Enter the OTP from the Email") || chal == nil {
			t.Fatalf("Basic PIN alone: %d %v\n%s", a.status, a.cookies, a.body)
		}
		noTxID("Basic PIN alone", a)
		code = mailOTP(2)
		seen = append(seen, code)
		if a := send("GET", "/login", nil, nil, chal); a.status != http.StatusOK || !strings.Contains(a.body, "Enter the OTP from the Email") || !strings.Contains(a.body, `name="otp"`) {
			t.Errorf("the form of the pending challenge: %d\n%s", a.status, a.body)
		}
		a = send("POST", "/login", url.Values{"otp": {code}}, nil, chal)
		if a.status != http.StatusSeeOther || a.header.Get("Location") != "/report" || a.cookies["httpauth_session"] == nil {
			t.Fatalf("answer of the Basic challenge: %d %v\n%s", a.status, a.header, a.body)
		}
		if a := send("GET", "/report", nil, nil, a.cookies["httpauth_session"]); a.status != http.StatusOK || a.body != "hello bob\n" {
			t.Errorf("with the second session: %d %q", a.status, a.body)
		}

		stop()
		outMu.Lock()
		// The address may hold the PIN's digits.
		logs := strings.ReplaceAll(out.String()+stderr.String(), base, "")
		outMu.Unlock()
		for _, secret := range append(seen, "5678") {
			if strings.Contains(logs, secret) {
				t.Errorf("the example printed a PIN or OTP (%s):\n%s", secret, logs)
			}
		}
	})
}
