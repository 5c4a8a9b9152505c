package token_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/token"
)

// paperRFC4226 are the RFC 4226 appendix D values of rfcKey.
var paperRFC4226 = []string{"755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"}

func TestPaper(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "paper", "", token.Params{"otpkey": rfcKey, "papertoken_count": "10"})
	if !strings.HasPrefix(tok.Serial, "PPR") {
		t.Errorf("serial %s", tok.Serial)
	}
	otps, _ := detail["otps"].(map[string]string)
	if len(otps) != 10 {
		t.Fatalf("otps %v", otps)
	}
	for i, want := range paperRFC4226 {
		if otps[strconv.Itoa(i)] != want {
			t.Errorf("otps[%d] = %q, want %s", i, otps[strconv.Itoa(i)], want)
		}
	}
	if gu := stDetailValue(t, detail, "googleurl"); !strings.HasPrefix(gu, "otpauth://paper/") {
		t.Errorf("googleurl %q", gu)
	}
	steps := []struct {
		otp string
		ok  bool
	}{
		{paperRFC4226[0], true},
		{paperRFC4226[0], false}, // replay
		{paperRFC4226[3], true},  // skipping inside the window
		{paperRFC4226[2], false}, // older than the last used
		{"000000", false},
	}
	for i, s := range steps {
		if r := stCheck(t, e, tok.Serial, s.otp); r.OK != s.ok {
			t.Fatalf("step %d: ok=%v (%s), want %v", i, r.OK, r.Message, s.ok)
		}
	}
	_, detail = e.initToken(t, "paper", "", nil)
	if otps, _ := detail["otps"].(map[string]string); len(otps) != 100 {
		t.Errorf("default: %d otps", len(otps))
	}
}

func TestPaperBadInput(t *testing.T) {
	e := newEnv(t)
	for _, p := range []token.Params{
		{"papertoken_count": "0"},
		{"papertoken_count": "1001"},
		{"papertoken_count": "ten"},
		{"2stepinit": "1"},
	} {
		stParamErr(t, stInitErr(t, e, "paper", p))
	}
}
