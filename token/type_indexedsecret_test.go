package token_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/token"
)

// isChallenge triggers a challenge for serial and returns its positions,
// the result and the stored challenge.
func isChallenge(t *testing.T, e *env, serial string, opts token.Params) ([]int, *token.ChallengeResult, *token.Challenge) {
	t.Helper()
	tok, err := e.svc.Get(t.Context(), serial)
	if err != nil {
		t.Fatal(err)
	}
	txid, err := e.svc.NewTransactionID()
	if err != nil {
		t.Fatal(err)
	}
	res, ch, err := e.svc.CreateChallenge(t.Context(), tok, txid, "", opts, nil)
	if err != nil {
		t.Fatalf("challenge: %v", err)
	}
	pos, ok := res.Attributes["random_positions"].([]int)
	if !ok {
		t.Fatalf("random_positions missing: %v", res.Attributes)
	}
	return pos, res, ch
}

func isAnswer(secret string, pos []int) string {
	var b strings.Builder
	for _, p := range pos {
		b.WriteRune([]rune(secret)[p-1])
	}
	return b.String()
}

func TestIndexedSecretChallenge(t *testing.T) {
	e := newEnv(t)
	const secret = "abcdefghijKLMNOPqrstü"
	tok, detail := e.initToken(t, "indexedsecret", "", token.Params{"otpkey": secret})
	if !strings.HasPrefix(tok.Serial, "PIIX") {
		t.Errorf("serial %s", tok.Serial)
	}
	if v := stDetailValue(t, detail, "otpkey"); v == "" || strings.Contains(v, secret) {
		t.Errorf("otpkey detail %q", v)
	}
	pos, res, ch := isChallenge(t, e, tok.Serial, nil)
	if len(pos) != 2 {
		t.Fatalf("positions %v: want 2", pos)
	}
	list := strconv.Itoa(pos[0]) + "," + strconv.Itoa(pos[1])
	if res.Message != "Please enter the positions "+list+" from your secret." || ch.Challenge != list {
		t.Errorf("message %q challenge %q", res.Message, ch.Challenge)
	}
	if got := ch.Expiration.Sub(ch.Created); got != 120*time.Second {
		t.Errorf("validity %v", got)
	}
	for _, p := range pos {
		if p < 1 || p > 21 {
			t.Fatalf("position %d out of range", p)
		}
	}
	answer := isAnswer(secret, pos)
	if m, err := e.svc.Verify(t.Context(), tok, answer+"x", nil, ch); err != nil || m.OK {
		t.Errorf("wrong answer: %v %v", m.OK, err)
	}
	if m, err := e.svc.Verify(t.Context(), tok, answer, nil, nil); err != nil || m.OK {
		t.Errorf("answer without challenge: %v %v", m.OK, err)
	}
	if r := stCheck(t, e, tok.Serial, answer); r.OK {
		t.Error("answer accepted without a challenge")
	}
	if m, err := e.svc.Verify(t.Context(), tok, answer, nil, ch); err != nil || !m.OK {
		t.Fatalf("right answer refused: %v %v", m.OK, err)
	}
	e.clock.Add(121 * time.Second)
	if m, _ := e.svc.Verify(t.Context(), tok, answer, nil, ch); m.OK {
		t.Error("expired challenge answered")
	}
}

func TestIndexedSecretCountTextAndGenkey(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "indexedsecret", "", token.Params{"genkey": "1"})
	v := strings.TrimPrefix(stDetailValue(t, detail, "otpkey"), "seed://")
	if len(v) != 64 {
		t.Fatalf("generated secret: %q, want 32 characters in hex", v)
	}
	opts := token.Params{"indexedsecret_count": "5", "indexedsecret_challenge_text": "Positions {0}, please"}
	pos, res, ch := isChallenge(t, e, tok.Serial, opts)
	if len(pos) != 5 || !strings.HasPrefix(res.Message, "Positions ") || !strings.HasSuffix(res.Message, ", please") ||
		strings.Contains(res.Message, "{0}") || strings.Count(ch.Challenge, ",") != 4 {
		t.Errorf("positions %v message %q challenge %q", pos, res.Message, ch.Challenge)
	}
	tok, _ = e.initToken(t, "indexedsecret", "", token.Params{"genkey": "1", "indexedsecret.length": "8", "indexedsecret.contents": "n"})
	if key, err := e.svc.Secret(tok, token.FieldKey); err != nil || len(key) != 8 || strings.Trim(string(key), "0123456789") != "" {
		t.Errorf("generated secret %d bytes, %v", len(key), err)
	}
}

func TestIndexedSecretBadInput(t *testing.T) {
	e := newEnv(t)
	const secret = "my-indexed-secret"
	err := stInitErr(t, e, "indexedsecret", token.Params{"otpkey": secret, "genkey": "1"})
	if !errors.Is(err, token.ErrGenkeyAndOtpkey) {
		t.Errorf("genkey+otpkey: %v", err)
	}
	stNoSecret(t, err, secret)
	err = stInitErr(t, e, "indexedsecret", token.Params{})
	if err.Error() != "Missing parameter: otpkey" {
		t.Errorf("missing otpkey: %v", err)
	}
	stParamErr(t, err)
	tok, _ := e.initToken(t, "indexedsecret", "", token.Params{"otpkey": secret})
	for _, n := range []string{"0", "x", "101"} {
		_, _, err := e.svc.CreateChallenge(t.Context(), tok, "1", "", token.Params{"indexedsecret_count": n}, nil)
		stParamErr(t, err, secret)
	}
}
