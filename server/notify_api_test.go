package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/testsvc"
)

func TestSMTPServerAPI(t *testing.T) {
	sink := testsvc.NewSMTPSink(t)
	e := newEnv(t)
	tok := e.login(t)
	def := form("server", "127.0.0.1", "port", fmt.Sprint(sink.Port), "sender", "authsrv@example.org",
		"username", "mailer", "password", "smtp-Secret-1", "description", "local sink", "timeout", "3")
	if v := wantOK(t, e.admin(t, tok, "POST", "/smtpserver/mail1", def)); v != true {
		t.Fatalf("POST /smtpserver = %v", v)
	}
	list := wantOK(t, e.admin(t, tok, "GET", "/smtpserver/", "")).([]any)
	d := list[0].(map[string]any)
	if len(list) != 1 || d["identifier"] != "mail1" || d["password"] != "__CENSORED__" || d["port"] != float64(sink.Port) {
		t.Errorf("GET /smtpserver/: %v", list)
	}
	r := e.admin(t, tok, "GET", "/smtpserver/", "")
	if strings.Contains(string(r.body), "smtp-Secret-1") {
		t.Error("the SMTP password was returned")
	}
	// Without username the sink needs no auth; send the test mail.
	wantOK(t, e.admin(t, tok, "POST", "/smtpserver/mail1", form("server", "127.0.0.1", "port", fmt.Sprint(sink.Port), "sender", "authsrv@example.org", "password", "")))
	v := wantOK(t, e.admin(t, tok, "POST", "/smtpserver/send_test_email",
		form("identifier", "mail1", "server", "127.0.0.1", "port", fmt.Sprint(sink.Port), "sender", "authsrv@example.org", "recipient", "admin@example.org")))
	if v != true {
		t.Fatalf("send_test_email = %v", v)
	}
	msgs := sink.Messages()
	if len(msgs) != 1 || msgs[0].To[0] != "admin@example.org" || !strings.Contains(msgs[0].Data, "The configuration mail1 is working.") {
		t.Errorf("received %+v", msgs)
	}
	// A closed port: false with a short reason, quickly.
	start := time.Now()
	r = e.admin(t, tok, "POST", "/smtpserver/send_test_email",
		form("identifier", "x", "server", "127.0.0.1", "port", "1", "sender", "authsrv@example.org", "recipient", "a@example.org", "timeout", "2"))
	if wantOK(t, r) != false || at(r.json, "detail.message") == "" {
		t.Errorf("closed port: %s", r.body)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("the failed test mail took too long")
	}
	inj := e.admin(t, tok, "POST", "/smtpserver/send_test_email", form("identifier", "x", "server", "127.0.0.1", "sender", "authsrv@example.org", "recipient", "a@b.c\r\nBcc: x@evil"))
	if inj.status != 400 || at(inj.json, "result.error.code") != float64(905) {
		t.Errorf("header injection: %d %s", inj.status, inj.body)
	}
	if len(sink.Messages()) != 1 {
		t.Error("the injected mail was sent")
	}
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/smtpserver/mail1", "")); v != true {
		t.Errorf("DELETE = %v", v)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/smtpserver/mail1", ""), 404, 601, "ERR601: The requested SMTPServer could not be found.")
}

func TestSMSGatewayAPI(t *testing.T) {
	var mu sync.Mutex
	var got []url.Values
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		user, pw, _ := r.BasicAuth()
		mu.Lock()
		v := r.Form
		v.Set("_auth", user+":"+pw)
		got = append(got, v)
		mu.Unlock()
		_, _ = io.WriteString(w, "OK sent")
	}))
	defer gw.Close()
	e := newEnv(t)
	tok := e.login(t)
	body := form("name", "gw1", "module", "privacyidea.lib.smsprovider.HttpSMSProvider.HttpSMSProvider",
		"option.URL", gw.URL, "option.HTTP_METHOD", "POST", "option.to", "{phone}", "option.text", "{otp}",
		"option.from", "authsrv", "option.RETURN_SUCCESS", "OK", "option.USERNAME", "smsuser", "option.PASSWORD", "sms-Secret-2",
		"header.X-Api-Key", "key-Secret-3", "secret.header.X-Api-Key", "key-Secret-3")
	id := wantOK(t, e.admin(t, tok, "POST", "/smsgateway", body)).(float64)
	list := wantOK(t, e.admin(t, tok, "GET", "/smsgateway/", "")).([]any)
	g := list[0].(map[string]any)
	if g["id"] != id || g["module"] != g["providermodule"] || at(g, "options.PASSWORD") != "__CENSORED__" || at(g, "headers.X-Api-Key") != "__CENSORED__" || at(g, "options.to") != "{phone}" {
		t.Errorf("GET /smsgateway/: %v", g)
	}
	if one := wantOK(t, e.admin(t, tok, "GET", fmt.Sprintf("/smsgateway/%d", int(id)), "")).([]any); len(one) != 1 {
		t.Errorf("GET /smsgateway/<id>: %v", one)
	}
	prov := wantOK(t, e.admin(t, tok, "GET", "/smsgateway/providers", "")).(map[string]any)
	if prov["privacyidea.lib.smsprovider.HttpSMSProvider.HttpSMSProvider"] == nil {
		t.Errorf("providers: %v", prov)
	}
	// Sending goes through the library until SMS tokens exist.
	if err := e.s.Notify().SendSMS(t.Context(), "gw1", "+49 170 1234567", "123456"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 || got[0].Get("to") != "+49 170 1234567" || got[0].Get("text") != "123456" || got[0].Get("from") != "authsrv" || got[0].Get("_auth") != "smsuser:sms-Secret-2" {
		t.Errorf("gateway received %v", got)
	}
	mu.Unlock()
	if n := wantOK(t, e.admin(t, tok, "DELETE", fmt.Sprintf("/smsgateway/option/%d/from", int(id)), "")); n != id {
		t.Errorf("DELETE option = %v", n)
	}
	if g := wantOK(t, e.admin(t, tok, "GET", "/smsgateway/", "")).([]any)[0].(map[string]any); at(g, "options.from") != nil {
		t.Errorf("option not deleted: %v", g)
	}
	if n := wantOK(t, e.admin(t, tok, "DELETE", "/smsgateway/gw1", "")); n != id {
		t.Errorf("DELETE = %v", n)
	}
	if r := e.admin(t, tok, "DELETE", "/smsgateway/gw1", ""); r.status != 404 {
		t.Errorf("second DELETE: %d", r.status)
	}
}

func TestRadiusServerAPI(t *testing.T) {
	rad := testsvc.FreeRADIUS(t, map[string]string{"radiususer": "rad-Pass-1"})
	e := newEnv(t)
	tok := e.login(t)
	def := form("server", "127.0.0.1", "port", fmt.Sprint(rad.Port), "secret", string(rad.Secret), "timeout", "2", "retries", "2")
	if v := wantOK(t, e.admin(t, tok, "POST", "/radiusserver/rad%201", def)); v != true {
		t.Fatalf("POST = %v", v)
	}
	list := wantOK(t, e.admin(t, tok, "GET", "/radiusserver/", "")).([]any)
	d := list[0].(map[string]any)
	if d["identifier"] != "rad_1" || d["secret"] != "__CENSORED__" {
		t.Errorf("GET /radiusserver/: %v", list)
	}
	if v := wantOK(t, e.admin(t, tok, "POST", "/radiusserver/test_request", form("identifier", "rad_1", "username", "radiususer", "password", "rad-Pass-1"))); v != true {
		t.Errorf("Access-Accept expected: %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "POST", "/radiusserver/test_request", form("identifier", "rad_1", "username", "radiususer", "password", "wrong"))); v != false {
		t.Errorf("Access-Reject expected: %v", v)
	}
	// Saving with the censored secret keeps it.
	wantOK(t, e.admin(t, tok, "POST", "/radiusserver/rad_1", form("server", "127.0.0.1", "port", fmt.Sprint(rad.Port), "secret", "__CENSORED__", "timeout", "2")))
	if v := wantOK(t, e.admin(t, tok, "POST", "/radiusserver/test_request", form("identifier", "rad_1", "username", "radiususer", "password", "rad-Pass-1"))); v != true {
		t.Errorf("after a censored save: %v", v)
	}
	wantError(t, e.admin(t, tok, "POST", "/radiusserver/rad2", form("server", "127.0.0.1", "secret", strings.Repeat("s", 300))), 400, 2234, "ERR2234: The RADIUS secret is too long")
	if strings.Contains(string(e.admin(t, tok, "GET", "/radiusserver/", "").body), string(rad.Secret)) {
		t.Error("the RADIUS secret was returned")
	}
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/radiusserver/rad_1", "")); v != true {
		t.Errorf("DELETE = %v", v)
	}
}
