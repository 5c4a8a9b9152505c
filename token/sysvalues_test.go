package token_test

import (
	"testing"
	"time"

	"github.com/authsrv/authsrv/token"
)

// TestChallengeValidityPerType: "<Type>ChallengeValidityTime" sets how
// long a challenge of that type lives; other types keep
// DefaultChallengeValidityTime.
func TestChallengeValidityPerType(t *testing.T) {
	e, src := newSettingsEnv(t, token.Settings{ChallengeValidity: 100 * time.Second})
	ctx := t.Context()
	hotp, _ := e.initToken(t, "hotp", "HOTPVAL1", token.Params{"otpkey": rfcKey})
	validity := func(txid string) time.Duration {
		t.Helper()
		_, c, err := e.svc.CreateChallenge(ctx, hotp, txid, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Expiration.Sub(c.Created)
	}
	if got := validity("tx1"); got != 100*time.Second {
		t.Errorf("default validity %v, want 100s", got)
	}
	src.change(func(s *token.Settings) { s.Values = map[string]string{"HotpChallengeValidityTime": "30"} })
	if got := validity("tx2"); got != 30*time.Second {
		t.Errorf("HotpChallengeValidityTime 30: validity %v", got)
	}
	src.change(func(s *token.Settings) { s.Values = map[string]string{"TotpChallengeValidityTime": "30"} })
	if got := validity("tx3"); got != 100*time.Second {
		t.Errorf("another type's setting: validity %v, want 100s", got)
	}
}

// TestQuestionnaireLeastAnswers: the system setting question.num_answers
// is the least number of answers an enrollment needs; a request cannot
// lower it.
func TestQuestionnaireLeastAnswers(t *testing.T) {
	e, _ := newSettingsEnv(t, token.Settings{Values: map[string]string{"question.num_answers": "3"}})
	two := `{"Pet?": "Rex", "City?": "Berlin"}`
	for _, p := range []token.Params{{"questions": two}, {"questions": two, "question.num_answers": "1"}} {
		if _, _, err := e.svc.Init(t.Context(), token.InitRequest{Type: "question", Params: p}); err == nil {
			t.Errorf("%v: two answers accepted with question.num_answers 3", p)
		}
	}
	e.initToken(t, "question", "QUSTOK", token.Params{"questions": `{"Pet?": "Rex", "City?": "Berlin", "Colour?": "Teal"}`})
}
