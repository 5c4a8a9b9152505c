package token_test

import (
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
)

func TestQuestionnaire(t *testing.T) {
	e := newEnv(t)
	answers := map[string]string{"Name of your first pet?": "Rex", "City of birth?": "Berlin", "Favourite colour?": "Teal"}
	tok, _ := e.initToken(t, "question", "", token.Params{
		"questions":            `{"Name of your first pet?": "Rex", "City of birth?": "Berlin", "Favourite colour?": "Teal"}`,
		"question.num_answers": "2",
	})
	if !strings.HasPrefix(tok.Serial, "QUST") {
		t.Errorf("serial %s", tok.Serial)
	}
	want := map[string]string{"question.0": "City of birth?", "question.1": "Favourite colour?", "question.2": "Name of your first pet?"}
	for k, v := range want {
		if tok.Info[k] != v {
			t.Errorf("%s = %q, want %q", k, tok.Info[k], v)
		}
	}
	for k, v := range tok.Info {
		for _, a := range answers {
			if strings.Contains(v, a) {
				t.Errorf("tokeninfo %s holds an answer", k)
			}
		}
	}
	seen := map[string]bool{}
	for range 30 {
		txid, _ := e.svc.NewTransactionID()
		res, ch, err := e.svc.CreateChallenge(t.Context(), tok, txid, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		q := tok.Info["question."+ch.Challenge]
		if q == "" || res.Message != q {
			t.Fatalf("challenge %q message %q", ch.Challenge, res.Message)
		}
		seen[q] = true
		a := answers[q]
		if m, err := e.svc.Verify(t.Context(), tok, strings.ToLower(a), nil, ch); err != nil || m.OK {
			t.Fatalf("answer in other case accepted: %v %v", m.OK, err)
		}
		for other, oa := range answers {
			if other != q {
				if m, _ := e.svc.Verify(t.Context(), tok, oa, nil, ch); m.OK {
					t.Fatal("another question's answer accepted")
				}
			}
		}
		if m, err := e.svc.Verify(t.Context(), tok, a, nil, ch); err != nil || !m.OK {
			t.Fatalf("right answer refused: %v %v", m.OK, err)
		}
	}
	if len(seen) < 2 {
		t.Errorf("30 challenges asked only %d distinct questions", len(seen))
	}
	if r := stCheck(t, e, tok.Serial, "Rex"); r.OK {
		t.Error("answer accepted without a challenge")
	}
}

func TestQuestionnaireReinit(t *testing.T) {
	e := newEnv(t)
	e.initToken(t, "question", "QUST1", token.Params{"questions": `{"a?": "1", "b?": "2", "c?": "3"}`})
	tok, _ := e.initToken(t, "question", "QUST1", token.Params{"questions": `{"z?": "26"}`})
	if tok.Info["question.0"] != "z?" || tok.Info["question.1"] != "" || tok.Info["question.2"] != "" {
		t.Errorf("old questions kept: %v", tok.Info)
	}
}

func TestQuestionnaireBadInput(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		params token.Params
	}{
		{"missing", token.Params{}},
		{"not json", token.Params{"questions": "Pet? Rex"}},
		{"array", token.Params{"questions": `["Pet?", "Rex"]`}},
		{"too few", token.Params{"questions": `{"Pet?": "Rex"}`, "question.num_answers": "2"}},
		{"empty answer", token.Params{"questions": `{"Pet?": "", "City?": "Rexville"}`}},
		{"empty question", token.Params{"questions": `{" ": "Rex"}`}},
		{"bad num", token.Params{"questions": `{"Pet?": "Rex"}`, "question.num_answers": "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := stInitErr(t, e, "question", tc.params)
			stParamErr(t, err, "Rex")
			if tc.name == "missing" && err.Error() != apierr.MissingParameter("questions").Error() {
				t.Errorf("message %q", err)
			}
		})
	}
}
