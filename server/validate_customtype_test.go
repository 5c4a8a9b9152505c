package server_test

import (
	"context"
	"sync"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// pigeon is a token type of a Go program: its challenge sends a code
// (recorded in sent), and its check accepts that code as the answer.
type pigeon struct {
	name string
	mu   *sync.Mutex
	sent *[]string
}

const pigeonCode = "4711"

func (p pigeon) Name() string                                  { return p.name }
func (pigeon) Prefix() string                                  { return "PIGE" }
func (pigeon) Enroll(_ context.Context, _ *token.Enroll) error { return nil }

func (pigeon) Check(_ context.Context, c *token.Check) (token.Match, error) {
	return token.Match{OK: c.Challenge != nil && c.OTP == pigeonCode, Counter: -1}, nil
}

func (p pigeon) Challenge(_ context.Context, c *token.ChallengeRequest) (*token.ChallengeResult, error) {
	return &token.ChallengeResult{Message: "code sent by pigeon", Send: func(_ context.Context, t *token.Token) error {
		p.mu.Lock()
		*p.sent = append(*p.sent, t.Serial)
		p.mu.Unlock()
		return nil
	}}, nil
}

// pigeonOnPIN is pigeon declaring, as email does, that a correct PIN alone
// asks for a challenge.
type pigeonOnPIN struct{ pigeon }

func (pigeonOnPIN) ChallengesOnPIN() bool { return true }

var _ token.PINChallenger = pigeonOnPIN{}

// TestCustomTypeChallengesOnPIN: a type registered through
// authsrv.WithTokenTypes that declares PINChallenger is challenged on its
// PIN without a challenge_response policy, as e-mail is, and its answer
// authenticates; the same type without the declaration is not.
func TestCustomTypeChallengesOnPIN(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()),
		authsrv.WithTokenTypes(pigeonOnPIN{pigeon{"pigeonpin", &mu, &sent}}, pigeon{"pigeon", &mu, &sent})})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "pigeonpin", "serial", "PP1", "user", "alice", "realm", "realm1", "pin", "pin")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "pigeon", "serial", "PG1", "user", "bob", "realm", "realm1", "pin", "pin")))
	who := caller.Caller{UserAgent: "embedder/1.0"}
	v := e.s.Validator()

	res, err := v.Check(t.Context(), validate.Request{Caller: who, User: "alice", Realm: "realm1", Pass: "pin"})
	if err != nil || res.Value || !res.Challenge || len(res.Challenges) != 1 || res.Challenges[0].Serial != "PP1" || res.Message != "code sent by pigeon" {
		t.Fatalf("PIN of the PINChallenger: %+v, %v", res, err)
	}
	mu.Lock()
	if len(sent) != 1 || sent[0] != "PP1" {
		t.Errorf("sent %v", sent)
	}
	mu.Unlock()
	res, err = v.Check(t.Context(), validate.Request{Caller: who, User: "alice", Realm: "realm1", Pass: pigeonCode, TransactionID: res.TransactionID})
	if err != nil || !res.Value || res.Serial != "PP1" || res.Message != validate.MsgFoundChallenge {
		t.Fatalf("answer: %+v, %v", res, err)
	}
	// The same over HTTP.
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
	if at(r.json, "result.authentication") != "CHALLENGE" || at(r.json, "detail.message") != "code sent by pigeon" {
		t.Fatalf("HTTP challenge: %s", r.body)
	}
	txid, _ := at(r.json, "detail.transaction_id").(string)
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pigeonCode, "transaction_id", txid), true, validate.MsgFoundChallenge)

	// Without the declaration the PIN alone is a wrong PIN+OTP.
	res, err = v.Check(t.Context(), validate.Request{Caller: who, User: "bob", Realm: "realm1", Pass: "pin"})
	if err != nil || res.Value || res.Challenge {
		t.Fatalf("PIN of the plain type: %+v, %v", res, err)
	}
	// triggerchallenge still reaches it: it has a challenge.
	res, err = v.Trigger(t.Context(), validate.Request{User: "bob", Realm: "realm1"})
	if err != nil || len(res.Challenges) != 1 || res.Challenges[0].Serial != "PG1" {
		t.Fatalf("trigger of the plain type: %+v, %v", res, err)
	}
}
