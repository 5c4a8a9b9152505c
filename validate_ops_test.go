package authsrv_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

var hotpKey = []byte("12345678901234567890")

// hotpServer is configServer with an HOTP token (PIN 1234) for alice in
// realm1.
func hotpServer(t *testing.T, opts ...authsrv.Option) *authsrv.Server {
	t.Helper()
	s := configServer(t, opts...)
	if _, err := s.Ops().InitToken(t.Context(), caller.Caller{}, authsrv.TokenInit{Type: "hotp", Serial: "H1",
		User: authsrv.Target{User: "alice", Realm: "realm1"}, Params: token.Params{"otpkey": fmt.Sprintf("%x", hotpKey), "pin": "1234"}}); err != nil {
		t.Fatal(err)
	}
	return s
}

func hotpPass(counter uint64) string { return "1234" + otp.HOTP(hotpKey, counter, 6, otp.SHA1) }

// TestValidatorEvents: the event handlers run around a Go program's
// Check as around an HTTP client's; a Pre error is the answer, changes
// nothing and is audited.
func TestValidatorEvents(t *testing.T) {
	rec := &recorder{}
	s := hotpServer(t, authsrv.WithEventHandler(rec))
	rec.seen, rec.posts = nil, nil
	res, err := s.Validator().Check(t.Context(), validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(0)})
	if err != nil || !res.Value {
		t.Fatalf("check: %v %v", res.Value, err)
	}
	if fmt.Sprint(rec.seen) != "[pre validate_check post validate_check]" {
		t.Fatalf("handler saw %v", rec.seen)
	}
	if e := rec.posts[0].Entry; e.Authentication != "ACCEPT" || e.Serial != "H1" || e.User != "alice" {
		t.Errorf("post entry %+v", e)
	}

	refusing := &recorder{}
	s = hotpServer(t, authsrv.WithEventHandler(refusing))
	refusing.refuse, refusing.posts = errors.New("not now"), nil
	before := len(auditRows(t, s))
	if _, err := s.Validator().Check(t.Context(), validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(0)}); err == nil || err.Error() != "not now" {
		t.Fatalf("err = %v, want the handler's", err)
	}
	tok, err := s.Tokens().Get(t.Context(), "H1")
	if err != nil || tok.Count != 0 || tok.FailCount != 0 {
		t.Fatalf("token after an aborted check: count %d, fails %d, %v", tok.Count, tok.FailCount, err)
	}
	rows := auditRows(t, s)
	if len(rows) != before+1 || fmt.Sprint(rows[len(rows)-1]["success"]) != "0" {
		t.Fatalf("aborted check: %d entries, last %v", len(rows)-before, rows[len(rows)-1])
	}
	if len(refusing.posts) != 1 || refusing.posts[0].Err == nil || refusing.posts[0].Name != validate.EventCheck {
		t.Errorf("post after an abort: %+v", refusing.posts)
	}
}

// TestValidatorAPIKeyRequired: AUTHZ api_key_required is decided by the
// validator from the caller's role, for Go programs and HTTP alike.
func TestValidatorAPIKeyRequired(t *testing.T) {
	s := hotpServer(t)
	if _, err := s.Policies().Set(t.Context(), policy.Policy{Name: "keys", Scope: policy.ScopeAuthorization,
		Action: "api_key_required", Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	counter := uint64(0)
	for _, tc := range []struct {
		name string
		who  caller.Caller
		want error
	}{
		{"anonymous", caller.Caller{Role: caller.Anonymous}, validate.ErrNoAPIKey},
		{"administrator's token", caller.Caller{Role: caller.Admin, Name: "admin"}, validate.ErrNotAPIKey},
		{"user's token", caller.Caller{Role: caller.User, Name: "alice", Realm: "realm1"}, validate.ErrNotAPIKey},
		{"API key", caller.Caller{Role: caller.APIKey}, nil},
		{"trusted program", caller.Caller{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(auditRows(t, s))
			res, err := s.Validator().Check(t.Context(), validate.Request{Caller: tc.who, User: "alice", Realm: "realm1", Pass: hotpPass(counter)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			rows := auditRows(t, s)
			if len(rows) != before+1 {
				t.Fatalf("%d audit entries", len(rows)-before)
			}
			last := rows[len(rows)-1]
			if tc.want != nil {
				if last["policies"] != "keys" || fmt.Sprint(last["success"]) != "0" {
					t.Errorf("refusal audited as %v", last)
				}
				return
			}
			if !res.Value {
				t.Fatalf("refused: %s", res.Message)
			}
			counter++
		})
	}
}
