package token_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// smsRecorder is an HTTP SMS gateway on 127.0.0.1 that records the phone
// numbers and texts it is asked to send.
type smsRecorder struct {
	srv *httptest.Server

	mu     sync.Mutex
	sent   []url.Values
	status int
}

func newSMSRecorder(t *testing.T) *smsRecorder {
	t.Helper()
	r := &smsRecorder{status: http.StatusOK}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.sent = append(r.sent, req.URL.Query())
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte("OK"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *smsRecorder) messages() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]url.Values(nil), r.sent...)
}

// last returns the n-th message (1-based) and fails unless exactly n
// arrived.
func (r *smsRecorder) last(t *testing.T, n int) (phone, text string) {
	t.Helper()
	msgs := r.messages()
	if len(msgs) != n {
		t.Fatalf("the gateway received %d messages, want %d", len(msgs), n)
	}
	return msgs[n-1].Get("to"), msgs[n-1].Get("text")
}

// smsSetup returns a token service whose notify service knows the gateway
// "gw" (the recorder), "broken" (answers 500) and "down" (a closed port).
func smsSetup(t *testing.T) (*env, *smsRecorder) {
	t.Helper()
	e := newEnv(t)
	rec := newSMSRecorder(t)
	broken := newSMSRecorder(t)
	broken.status = http.StatusInternalServerError
	for name, u := range map[string]string{
		"gw":     rec.srv.URL + "/send",
		"broken": broken.srv.URL + "/send",
		"down":   fmt.Sprintf("http://127.0.0.1:%d/send", testsvc.FreePort(t)),
	} {
		g := notify.Gateway{Name: name, Module: notify.ModuleHTTP, Options: map[string]string{
			"URL": u, "HTTP_METHOD": "GET", "to": "{phone}", "text": "{otp}", "TIMEOUT": "2"}}
		if _, err := e.notify.SetGateway(t.Context(), g); err != nil {
			t.Fatal(err)
		}
	}
	return e, rec
}

func TestSMSEnroll(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		params token.Params
	}{
		{"NoPhone", token.Params{}},
		{"EmptyPhone", token.Params{"phone": "  "}},
		{"NoDigit", token.Params{"phone": "call me"}},
		{"ControlCharacter", token.Params{"phone": "+49 170\n1234"}},
		{"TooLong", token.Params{"phone": strings.Repeat("1", 65)}},
		{"BadGatewayName", token.Params{"phone": "123", "sms.identifier": "a/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.Init(t.Context(), token.InitRequest{Type: "sms", Params: tc.params})
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("err %v, want a parameter error", err)
			}
		})
	}
	t.Run("Phone", func(t *testing.T) {
		tok, detail := e.initToken(t, "sms", "", token.Params{"phone": "+49 170 1234567", "sms.identifier": "gw"})
		if !strings.HasPrefix(tok.Serial, "PISM") || tok.Info["phone"] != "+49 170 1234567" || tok.Info["sms.identifier"] != "gw" || tok.Info["dynamic_phone"] != "" {
			t.Errorf("token %+v", tok)
		}
		seedOf(t, detail)
		g, _ := detail["googleurl"].(map[string]any)
		if v, _ := g["value"].(string); !strings.HasPrefix(v, "otpauth://sms/") {
			t.Errorf("googleurl %v", detail["googleurl"])
		}
	})
	t.Run("Dynamic", func(t *testing.T) {
		tok, _ := e.initToken(t, "sms", "", token.Params{"dynamic_phone": "1"})
		if tok.Info["dynamic_phone"] != "True" || tok.Info["phone"] != "" {
			t.Errorf("info %v", tok.Info)
		}
	})
}

func TestSMSChallengeSendsEachOTPOnce(t *testing.T) {
	e, gw := smsSetup(t)
	ctx := t.Context()
	owner := &user.User{Login: "carol", Realm: "r1", Resolver: "res1", UID: "3"}
	tok, detail, err := e.svc.Init(ctx, token.InitRequest{Type: "sms", Serial: "PISM0001", Owner: owner,
		Params: token.Params{"phone": "+49 170 1234567", "sms.identifier": "gw"}})
	if err != nil {
		t.Fatal(err)
	}
	key := seedOf(t, detail)
	opts := token.Params{
		"smstext":            "{user}: <otp> is your code for {serial}",
		"sms_challenge_text": "SMS to {phone_redacted} ({phone}) for {user}",
	}
	res, ch, err := e.svc.CreateChallenge(ctx, tok, "11111111111111111111", "", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Message != "SMS to ***********4567 (+49 170 1234567) for carol" || res.ClientMode != "interactive" ||
		res.Validity != 300*time.Second ||
		fmt.Sprint(res.Attributes) != fmt.Sprintf("map[state:<nil> valid_until:%s]", pyTime(e.clock.Now().Add(300*time.Second))) {
		t.Errorf("result %+v", res)
	}
	if ch == nil || !ch.Expiration.Equal(e.clock.Now().Add(300*time.Second)) {
		t.Errorf("challenge %+v", ch)
	}
	first := hotpAt(key, 1)
	phone, text := gw.last(t, 1)
	if phone != "+49 170 1234567" || text != "carol: "+first+" is your code for PISM0001" {
		t.Errorf("sms to %q: %q", phone, text)
	}
	if r, err := e.svc.CheckOTP(ctx, tok.Serial, first, nil); err != nil || !r.OK {
		t.Fatalf("the sent OTP: %+v, %v", r, err)
	}
	if r, err := e.svc.CheckOTP(ctx, tok.Serial, first, nil); err != nil || r.OK {
		t.Fatalf("the sent OTP a second time: %+v, %v", r, err)
	}

	res, _, err = e.svc.CreateChallenge(ctx, tok, "22222222222222222222", "11111111111111111111", token.Params{"sms.providerTimeout": "60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Message != "Enter the OTP from the SMS:" || res.Validity != 60*time.Second || res.Attributes["state"] != "11111111111111111111" ||
		res.Attributes["valid_until"] != pyTime(e.clock.Now().Add(60*time.Second)) {
		t.Errorf("second result %+v", res)
	}
	second := hotpAt(key, 3)
	if _, text := gw.last(t, 2); text != second || second == first {
		t.Errorf("second sms %q, want %q", text, second)
	}
	if r, err := e.svc.CheckOTP(ctx, tok.Serial, second, nil); err != nil || !r.OK {
		t.Fatalf("the second OTP: %+v, %v", r, err)
	}
}

func TestSMSSendFailure(t *testing.T) {
	e, gw := smsSetup(t)
	ctx := t.Context()
	for i, tc := range []struct {
		name   string
		params token.Params
		opts   token.Params
	}{
		{"GatewayDown", token.Params{"sms.identifier": "down"}, nil},
		{"GatewayError", token.Params{"sms.identifier": "broken"}, nil},
		{"UnknownGateway", token.Params{"sms.identifier": "nope"}, nil},
		{"NoGateway", token.Params{}, nil},
		{"OptionGatewayDown", token.Params{}, token.Params{"sms.identifier": "down"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.params["phone"] = "+49 170 1234567"
			tok, detail := e.initToken(t, "sms", fmt.Sprintf("PISMFAIL%d", i), tc.params)
			_, _, err := e.svc.CreateChallenge(ctx, tok, "33333333333333333333", "", tc.opts, nil)
			wantNotSent(t, err, token.ErrSMSNotSent, hotpAt(seedOf(t, detail), 1))
			wantNoChallenge(t, e, tok.Serial)
		})
	}
	if n := len(gw.messages()); n != 0 {
		t.Errorf("the recorder received %d messages", n)
	}
}

func TestSMSDynamicPhone(t *testing.T) {
	e, gw := smsSetup(t)
	ctx := t.Context()
	tok, detail := e.initToken(t, "sms", "PISMDYN1", token.Params{"dynamic_phone": "1", "sms.identifier": "gw"})
	if _, _, err := e.svc.CreateChallenge(ctx, tok, "44444444444444444444", "", nil, map[string]string{"mobile": "+1 555 0100", "phone": "+1 555 0199"}); err != nil {
		t.Fatal(err)
	}
	if phone, text := gw.last(t, 1); phone != "+1 555 0100" || text != hotpAt(seedOf(t, detail), 1) {
		t.Errorf("sms to %q: %q", phone, text)
	}
	for _, info := range []map[string]string{nil, {"phone": "+1 555 0199"}, {"mobile": "+1 555\r\n0100"}} {
		_, _, err := e.svc.CreateChallenge(ctx, tok, "55555555555555555555", "", nil, info)
		wantNotSent(t, err, token.ErrSMSNotSent)
		if chs, _ := e.svc.Challenges(ctx, token.ChallengeFilter{TransactionID: "55555555555555555555"}); len(chs) != 0 {
			t.Errorf("owner info %v: challenges %v", info, chs)
		}
	}
	if n := len(gw.messages()); n != 1 {
		t.Errorf("the recorder received %d messages, want 1", n)
	}
}

// pyTime prints t as privacyIDEA's valid_until: local time, microseconds.
func pyTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05.000000") }
