package server_test

// What the FreeRADIUS plugin, pam_privacyidea, privacyideaadm and
// privacyidea-validate send on the wire and what they read back
// (shared/spec/real-clients.md), emulated against a real listener.

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/testsvc"
)

// clientEnv is mailEnv plus HOTP tokens for the client tests and a real
// HTTP listener:
//
//	müller: FR (PIN "p w%+&=ä")   carol.smith: PQ (PIN "xAy")
//	alice:  EA e-mail (mailpin)   bob: EB e-mail (bobpin), PB (PIN "a b", other key)
func clientEnv(t *testing.T) (*env, string, *testsvc.SMTPSink, *httptest.Server) {
	t.Helper()
	e, tok, sink := mailEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "FR", "otpkey", rfcKeyHex, "user", "müller", "realm", "realm1", "pin", "p w%+&=ä")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "PQ", "otpkey", rfcKeyHex, "user", "carol.smith", "realm", "realm1", "pin", "xAy")))
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	return e, tok, sink, srv
}

// ---- FreeRADIUS (privacyidea_radius.pm under rlm_perl, LWP) ----

// uriEncode is URI::Encode::uri_encode as the plugin calls it: reserved
// characters stay, everything else outside the unreserved set (and % itself)
// is percent-encoded as UTF-8.
func uriEncode(s string) string {
	const keep = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~!*'();:@&=+$,/?#[]"
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// radius is what the plugin answers the RADIUS client.
type radius struct {
	packet string // Access-Accept, Access-Challenge, Access-Reject
	rlm    string // OK, HANDLED, REJECT, NOTFOUND, FAIL
	reply  string // Reply-Message
	state  string // State of a challenge
}

// perlTrue is Perl's truth of a value JSON::XS decoded.
func perlTrue(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != "" && x != "0"
	case float64:
		return x != 0
	}
	return true // references
}

// freeradius sends one request as the plugin does (a new connection with
// Connection: close, Perl hash order, user and pass encoded twice) and
// applies the plugin's decision to the answer.
func freeradius(t *testing.T, srv *httptest.Server, params map[string]string) radius {
	t.Helper()
	var pairs []string
	for k, v := range params { // random order, as a Perl hash
		if k == "user" || k == "pass" {
			v = uriEncode(v)
		}
		pairs = append(pairs, url.QueryEscape(k)+"="+url.QueryEscape(v))
	}
	body := strings.Join(pairs, "&")
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "POST /validate/check HTTP/1.1\r\nTE: deflate,gzip;q=0.3\r\nConnection: TE, close\r\nHost: %s\r\n"+
		"User-Agent: FreeRADIUS\r\nContent-Length: %d\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n%s",
		srv.Listener.Addr(), len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Close {
		t.Error("the answer to Connection: close does not close")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection still open after the answer: %v", err)
	}
	if enc := resp.Header.Get("Content-Encoding") + resp.Header.Get("Transfer-Encoding"); strings.Contains(enc, "gzip") || strings.Contains(enc, "deflate") {
		t.Errorf("compressed answer %q", enc)
	}
	var j map[string]any
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatalf("not JSON: %d %q", resp.StatusCode, raw)
	}
	noNulls(t, j, "$")
	// result.value is a JSON boolean: a string "false" would be an accept.
	if _, ok := at(j, "result.value").(bool); at(j, "result.status") == true && !ok {
		t.Errorf("result.value is %T, want bool: %s", at(j, "result.value"), raw)
	}

	r := radius{packet: "Access-Reject", rlm: "REJECT"}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.rlm, r.reply = "FAIL", "privacyIDEA request failed: "+resp.Status
	}
	switch {
	case perlTrue(at(j, "result.value")):
		r = radius{packet: "Access-Accept", rlm: "OK", reply: "privacyIDEA access granted"}
	case perlTrue(at(j, "result.status")):
		r.reply, _ = at(j, "detail.message").(string)
		if txid := at(j, "detail.transaction_id"); perlTrue(txid) {
			r.packet, r.rlm, r.state = "Access-Challenge", "HANDLED", txid.(string)
		}
	default:
		r.reply, _ = at(j, "result.error.message").(string)
		r.rlm = "FAIL"
		if at(j, "result.error.code") == float64(904) {
			r.rlm = "NOTFOUND"
		}
	}
	return r
}

func TestFreeRADIUSPlugin(t *testing.T) {
	e, tok, sink, srv := clientEnv(t)

	t.Run("the double encoding of user and pass", func(t *testing.T) {
		// On the wire: user=m%25C3%25BCller, pass=p%2520w%2525%2B%26%3D%25C3%25A4287082.
		got := freeradius(t, srv, map[string]string{"user": "müller", "pass": "p w%+&=ä" + rfcHOTP[0], "client": "192.0.2.10"})
		if got != (radius{packet: "Access-Accept", rlm: "OK", reply: "privacyIDEA access granted"}) {
			t.Fatalf("got %+v", got)
		}
		if n := auditCount(t, e, map[string]string{"action": "*/validate/check", "user": "müller", "serial": "FR", "success": "1"}); n != 1 {
			t.Errorf("%d audit entries for müller", n)
		}
	})
	t.Run("a wrong OTP", func(t *testing.T) {
		got := freeradius(t, srv, map[string]string{"user": "müller", "pass": "p w%+&=ä" + "000000"})
		if got != (radius{packet: "Access-Reject", rlm: "REJECT", reply: "wrong otp value"}) {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("the password encoded once is another password", func(t *testing.T) {
		// A PIN made of the once-encoded text does not pass as the PIN.
		got := freeradius(t, srv, map[string]string{"user": "müller", "pass": "p%20w%25+&=%C3%A4" + rfcHOTP[1]})
		if got.packet != "Access-Reject" {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("an unknown user", func(t *testing.T) {
		got := freeradius(t, srv, map[string]string{"user": "nobody", "pass": "x"})
		if got != (radius{packet: "Access-Reject", rlm: "NOTFOUND", reply: "ERR904: User <nobody@realm1> does not exist."}) {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("an empty pass", func(t *testing.T) {
		got := freeradius(t, srv, map[string]string{"user": "müller", "pass": ""})
		if got != (radius{packet: "Access-Reject", rlm: "REJECT", reply: "wrong otp pin"}) {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("e-mail challenge round trip with state", func(t *testing.T) {
		wantOK(t, e.admin(t, tok, "POST", "/token/reset", form("serial", "EB")))
		before := len(sink.Messages())
		got := freeradius(t, srv, map[string]string{"user": "bob", "pass": "bobpin", "client": "192.0.2.10"})
		if got.packet != "Access-Challenge" || got.rlm != "HANDLED" || got.reply != "Enter the OTP from the Email" || len(got.state) != 20 {
			t.Fatalf("first leg %+v", got)
		}
		// The RADIUS State carries the transaction id's octets; the
		// plugin unpacks them back to the string.
		state := hex.EncodeToString([]byte(got.state))
		if b, err := hex.DecodeString(state); err != nil || string(b) != got.state {
			t.Fatalf("state round trip %q", state)
		}
		state = got.state
		msgs := sink.Messages()
		if len(msgs) != before+1 {
			t.Fatalf("%d mails", len(msgs)-before)
		}
		code := sixDigits.FindString(msgs[before].Data)
		got = freeradius(t, srv, map[string]string{"user": "bob", "state": state, "pass": code, "client": "192.0.2.10"})
		if got.packet != "Access-Accept" {
			t.Fatalf("second leg %+v", got)
		}
		got = freeradius(t, srv, map[string]string{"user": "bob", "state": state, "pass": code})
		if got.packet != "Access-Reject" {
			t.Fatalf("the answer was accepted twice: %+v", got)
		}
	})
}

// ---- pam_privacyidea (libcurl, nlohmann::json) ----

// pamEscape is the module's encoding: only A-Za-z0-9-_.~ stay.
func pamEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// pamAnswer is what the module reads, with nlohmann's strict typing.
type pamAnswer struct {
	value      bool
	errMessage string
	errCode    int
	message    string
	txid       string
	modes      []string // type/client_mode of each challenge
}

// pamRead decodes as the module does: get<bool>, get<std::string> and
// get<int> without try/catch. A wrong type or a null aborts the process.
func pamRead(t *testing.T, body []byte) pamAnswer {
	t.Helper()
	var j map[string]any
	if err := json.Unmarshal(body, &j); err != nil {
		t.Fatalf("not JSON: %q", body)
	}
	noNulls(t, j, "$")
	var a pamAnswer
	str := func(path string, v any) string {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("%s is %T, the module would call std::terminate: %s", path, v, body)
		}
		return s
	}
	if e, ok := at(j, "result").(map[string]any)["error"]; ok {
		a.errMessage = str("result.error.message", at(e, "message"))
		code, ok := at(e, "code").(float64)
		if !ok || code != float64(int(code)) {
			t.Fatalf("result.error.code is %T %v", at(e, "code"), at(e, "code"))
		}
		a.errCode = int(code)
		return a
	}
	v, ok := at(j, "result.value").(bool)
	if !ok {
		t.Fatalf("result.value is %T: %s", at(j, "result.value"), body)
	}
	a.value = v
	d, _ := j["detail"].(map[string]any)
	if m, ok := d["message"]; ok {
		a.message = str("detail.message", m)
	}
	if x, ok := d["transaction_id"]; ok {
		a.txid = str("detail.transaction_id", x)
	}
	if mc, ok := d["multi_challenge"]; ok {
		list, ok := mc.([]any)
		if !ok {
			t.Fatalf("multi_challenge is %T", mc)
		}
		for i, c := range list {
			a.modes = append(a.modes, str(fmt.Sprintf("multi_challenge[%d].type", i), at(c, "type"))+"/"+
				str(fmt.Sprintf("multi_challenge[%d].client_mode", i), at(c, "client_mode")))
		}
	}
	return a
}

// pam posts as the module does: keys sorted, values encoded by hand.
func pam(t *testing.T, srv *httptest.Server, params map[string]string) pamAnswer {
	t.Helper()
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, k+"="+pamEscape(params[k]))
	}
	req, err := http.NewRequest("POST", srv.URL+"/validate/check", strings.NewReader(strings.Join(pairs, "&")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "PAM/1.1.0")
	req.Header.Set("Accept", "*/*")
	return pamDo(t, req)
}

func pamDo(t *testing.T, req *http.Request) pamAnswer {
	t.Helper()
	resp, err := srvClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return pamRead(t, body)
}

var srvClient = &http.Client{Timeout: 5 * time.Second}

func TestPAMModule(t *testing.T) {
	e, tok, sink, srv := clientEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "PB", "otpkey", "0102030405060708090a0b0c0d0e0f1011121314", "user", "bob", "realm", "realm1", "pin", "a b")))
	pb := func(c uint64) string { return mustHOTP(t, "0102030405060708090a0b0c0d0e0f1011121314", c) }

	t.Run("sendPassword with a space (%20)", func(t *testing.T) {
		a := pam(t, srv, map[string]string{"user": "bob", "pass": "a b" + pb(0), "realm": "realm1"})
		if !a.value || a.txid != "" || a.errMessage != "" {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("a literal %41 in the password arrives as A", func(t *testing.T) {
		// The reference server decodes form values twice; so do we.
		a := pam(t, srv, map[string]string{"user": "carol.smith", "pass": "x%41y" + rfcHOTP[0]})
		if !a.value {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("wrong OTP", func(t *testing.T) {
		a := pam(t, srv, map[string]string{"user": "bob", "pass": "a b" + "000000"})
		if a.value || a.txid != "" || a.message != "wrong otp value" {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("unknown user", func(t *testing.T) {
		a := pam(t, srv, map[string]string{"user": "nobody", "pass": "x"})
		if a.errCode != 904 || a.errMessage != "ERR904: User <nobody@realm1> does not exist." {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("sendEmptyPass", func(t *testing.T) {
		a := pam(t, srv, map[string]string{"user": "bob", "pass": ""})
		if a.value || a.txid != "" || a.message == "" {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("e-mail challenge loop", func(t *testing.T) {
		wantOK(t, e.admin(t, tok, "POST", "/token/reset", form("serial", "EA")))
		before := len(sink.Messages())
		a := pam(t, srv, map[string]string{"user": "alice", "pass": "mailpin"})
		if a.value || len(a.txid) != 20 || a.message != "Enter the OTP from the Email" || !slices.Equal(a.modes, []string{"email/interactive"}) {
			t.Fatalf("challenge %+v", a)
		}
		code := sixDigits.FindString(sink.Messages()[before].Data)
		// The module prompts with detail.message and resends with transaction_id.
		a = pam(t, srv, map[string]string{"user": "alice", "pass": code, "transaction_id": a.txid})
		if !a.value || a.txid != "" {
			t.Fatalf("answer %+v", a)
		}
	})
	t.Run("poll and finalise with an empty pass", func(t *testing.T) {
		wantOK(t, e.admin(t, tok, "POST", "/token/reset", form("serial", "EA")))
		a := pam(t, srv, map[string]string{"user": "alice", "pass": "mailpin"})
		if len(a.txid) != 20 {
			t.Fatalf("%+v", a)
		}
		for _, txid := range []string{a.txid, "12345678901234567890"} {
			req, _ := http.NewRequest("GET", srv.URL+"/validate/polltransaction?transaction_id="+txid, nil)
			req.Header.Set("User-Agent", "PAM/1.1.0")
			req.Header.Set("Accept", "*/*")
			p := pamDo(t, req)
			if p.value || p.errMessage != "" {
				t.Fatalf("poll %s: %+v", txid, p)
			}
		}
		a = pam(t, srv, map[string]string{"user": "alice", "pass": "", "transaction_id": a.txid})
		if a.value {
			t.Fatalf("an empty pass finished a pending transaction: %+v", a)
		}
	})
}

// ---- privacyideaadm (python-requests 2.28) and privacyidea-validate ----

func requests(t *testing.T, srv *httptest.Server, method, path string, body url.Values, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "python-requests/2.28.1")
	req.Header.Set("Accept-Encoding", "gzip, deflate")
	req.Header.Set("Accept", "*/*")
	req.Header.Set("Connection", "keep-alive")
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srvClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatalf("%s %s: not JSON: %d %q", method, path, resp.StatusCode, raw)
	}
	noNulls(t, j, "$") // privacyideaadm pretty-prints realm and resolver lists: their nulls are harmless
	return resp.StatusCode, j
}

func TestPrivacyideaadm(t *testing.T) {
	_, _, _, srv := clientEnv(t)
	status, j := requests(t, srv, "POST", "/auth", url.Values{"username": {"admin"}, "password": {adminPass}}, nil)
	tok, _ := at(j, "result.value.token").(string)
	if status != 200 || at(j, "result.status") != true || tok == "" {
		t.Fatalf("login: %d %v", status, j)
	}
	get := func(t *testing.T, path string, hdr map[string]string) map[string]any {
		t.Helper()
		if hdr == nil {
			hdr = map[string]string{"Authorization": tok}
		}
		status, j := requests(t, srv, "GET", path, nil, hdr)
		if status >= 300 || at(j, "result.status") != true {
			t.Fatalf("GET %s: %d %v (the CLI exits 1 on any status >= 300)", path, status, j)
		}
		return j
	}

	t.Run("token list", func(t *testing.T) {
		for _, q := range []string{"/token/?user=&serial=", "/token/?user=m%C3%BCller&serial=", "/token/?user=&serial=FR"} {
			j := get(t, q, nil)
			list, _ := at(j, "result.value.tokens").([]any)
			if len(list) == 0 {
				t.Fatalf("%s: no tokens: %v", q, j)
			}
			for _, it := range list {
				for _, f := range []string{"id", "description", "serial", "username", "resolver", "maxfail", "active", "failcount", "sync_window"} {
					if _, ok := it.(map[string]any)[f]; !ok {
						t.Errorf("%s: token without %s: %v", q, f, it)
					}
				}
			}
		}
	})
	t.Run("PI-Authorization", func(t *testing.T) {
		get(t, "/token/", map[string]string{"PI-Authorization": tok})
	})
	t.Run("user list", func(t *testing.T) {
		list, _ := at(get(t, "/user/?username=*", nil), "result.value").([]any)
		if len(list) < 4 {
			t.Fatalf("users %v", list)
		}
		for _, u := range list {
			for _, f := range []string{"username", "surname", "userid", "phone", "mobile", "email"} {
				if _, ok := u.(map[string]any)[f]; !ok {
					t.Errorf("user without %s: %v", f, u)
				}
			}
		}
	})
	t.Run("realm and resolver list", func(t *testing.T) {
		get(t, "/realm/", nil)
		get(t, "/resolver/", nil)
	})
	t.Run("audit list", func(t *testing.T) {
		for _, q := range []string{"/audit/?sortname=number&sortorder=desc", "/audit/?sortname=number&sortorder=desc&page=1&rp=15&query=FR&qtype=serial"} {
			j := get(t, q, nil)
			rows, ok := at(j, "result.value.auditdata").([]any)
			if _, isNum := at(j, "result.value.count").(float64); !ok || !isNum || len(rows) == 0 {
				t.Fatalf("%s: %v", q, j)
			}
		}
	})
	t.Run("config and machine list", func(t *testing.T) {
		for _, p := range []string{"/system/", "/machine/"} {
			status, _ := requests(t, srv, "GET", p, nil, map[string]string{"Authorization": tok})
			if status >= 300 {
				t.Skipf("MISSING: GET %s is not routed (%d): privacyideaadm 'config list' and the machine commands exit 1", p, status)
			}
		}
	})
}

func TestPrivacyideaValidate(t *testing.T) {
	_, _, _, srv := clientEnv(t)
	// It prints "successfully authenticated" when status and value are true,
	// "failed to authenticate" when status is true and value false, else
	// result.error.message.
	outcome := func(user, pass string) string {
		_, j := requests(t, srv, "POST", "/validate/check", url.Values{"user": {user}, "pass": {pass}, "realm": {"realm1"}}, nil)
		st, ok := at(j, "result.status").(bool)
		if !ok {
			t.Fatalf("result.status %v", j)
		}
		if st {
			if v, ok := at(j, "result.value").(bool); !ok {
				t.Fatalf("result.value %T", at(j, "result.value"))
			} else if v {
				return "successfully authenticated"
			}
			return "failed to authenticate"
		}
		msg, ok := at(j, "result.error.message").(string)
		if !ok {
			t.Fatalf("result.error.message %v", j)
		}
		return msg
	}
	for _, tc := range []struct{ user, pass, want string }{
		{"carol.smith", "xAy" + rfcHOTP[0], "successfully authenticated"},
		{"carol.smith", "xAy" + rfcHOTP[0], "failed to authenticate"},
		{"alice", "mailpin", "failed to authenticate"}, // a challenge counts as a failure
		{"carol.smith", "", "failed to authenticate"},  // the prompted-password bug sends an empty pass
		{"nobody", "x", "ERR904: User <nobody@realm1> does not exist."},
	} {
		if got := outcome(tc.user, tc.pass); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.user, got, tc.want)
		}
	}
}

// mustHOTP is the 6-digit SHA-1 HOTP of a hex key at counter c.
func mustHOTP(t *testing.T, hexKey string, c uint64) string {
	t.Helper()
	key, err := hex.DecodeString(hexKey)
	if err != nil {
		t.Fatal(err)
	}
	return otp.HOTP(key, c, 6, otp.SHA1)
}
