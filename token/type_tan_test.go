package token_test

import (
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/token"
)

var tanEntryRe = regexp.MustCompile(`^[0-9a-f]{16}:[0-9a-f]{64}$`)

func TestTANGivenList(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "tan", "", token.Params{"tans": " 1111111\n2222222\t3333333 ", "otplen": "6"})
	if !strings.HasPrefix(tok.Serial, "PITN") || tok.OTPLen != 7 || tok.Info["tan.count"] != "3" {
		t.Fatalf("serial %s otplen %d count %q", tok.Serial, tok.OTPLen, tok.Info["tan.count"])
	}
	otps, _ := detail["otps"].(map[string]string)
	if otps["0"] != "1111111" || otps["1"] != "2222222" || otps["2"] != "3333333" || len(otps) != 3 {
		t.Errorf("otps %v", otps)
	}
	for i := range 3 {
		v := tok.Info["tan.tan"+strconv.Itoa(i)]
		if !tanEntryRe.MatchString(v) {
			t.Errorf("tan.tan%d = %q: want salt:hash", i, v)
		}
	}
	if tok.Info["tan.tan0"][:16] == tok.Info["tan.tan1"][:16] {
		t.Error("salts repeat")
	}
	steps := []struct {
		otp   string
		ok    bool
		count string
	}{
		{"2222222", true, "2"},
		{"2222222", false, "2"},
		{"4444444", false, "2"},
		{"1111111", true, "1"},
		{"3333333", true, "0"},
		{"3333333", false, "0"},
	}
	for i, s := range steps {
		r := stCheck(t, e, tok.Serial, s.otp)
		if r.OK != s.ok {
			t.Fatalf("step %d: ok=%v (%s), want %v", i, r.OK, r.Message, s.ok)
		}
		got, err := e.svc.Get(t.Context(), tok.Serial)
		if err != nil {
			t.Fatal(err)
		}
		if got.Info["tan.count"] != s.count {
			t.Fatalf("step %d: tan.count %q, want %s", i, got.Info["tan.count"], s.count)
		}
	}
}

func TestTANGenerated(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "tan", "", token.Params{"otpkey": rfcKey, "tantoken_count": "5"})
	key, _ := hex.DecodeString(rfcKey)
	otps, _ := detail["otps"].(map[string]string)
	if len(otps) != 5 || tok.Info["tan.count"] != "5" {
		t.Fatalf("otps %v count %q", otps, tok.Info["tan.count"])
	}
	for i := range 5 {
		if want := otp.HOTP(key, uint64(i), 6, otp.SHA1); otps[strconv.Itoa(i)] != want {
			t.Errorf("otps[%d] = %q, want %s", i, otps[strconv.Itoa(i)], want)
		}
	}
	if stDetailValue(t, detail, "otpkey") == "" || stDetailValue(t, detail, "googleurl") == "" {
		t.Error("HOTP init detail missing")
	}
	// TANs are usable in any order, each once.
	for _, i := range []string{"4", "0", "2"} {
		if r := stCheck(t, e, tok.Serial, otps[i]); !r.OK {
			t.Errorf("tan %s refused: %s", i, r.Message)
		}
		if r := stCheck(t, e, tok.Serial, otps[i]); r.OK {
			t.Errorf("tan %s accepted twice", i)
		}
	}
	tok, detail = e.initToken(t, "tan", "", nil)
	if otps, _ := detail["otps"].(map[string]string); len(otps) != 100 || tok.Info["tan.count"] != "100" {
		t.Errorf("default count: %d otps, tan.count %q", len(otps), tok.Info["tan.count"])
	}
	// Re-initialising replaces the list.
	tok, _ = e.initToken(t, "tan", tok.Serial, token.Params{"tans": "123456 654321"})
	n := 0
	for k := range tok.Info {
		if strings.HasPrefix(k, "tan.tan") {
			n++
		}
	}
	if n != 2 || tok.Info["tan.count"] != "2" {
		t.Errorf("after re-init %d entries, count %q", n, tok.Info["tan.count"])
	}
}

func TestTANParallelUse(t *testing.T) {
	e := newEnv(t)
	tok, _ := e.initToken(t, "tan", "", token.Params{"tans": "918273 111111"})
	oks := stParallel(t, 8, func() bool {
		r, err := e.svc.CheckOTP(t.Context(), tok.Serial, "918273", nil)
		return err == nil && r.OK
	})
	if oks != 1 {
		t.Errorf("%d successes, want exactly 1", oks)
	}
}

func TestTANBadInput(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		params token.Params
	}{
		{"empty list", token.Params{"tans": " \n "}},
		{"mixed lengths", token.Params{"tans": "123456 1234567"}},
		{"too many", token.Params{"tans": strings.Repeat("123456 ", 1001)}},
		{"count zero", token.Params{"tantoken_count": "0"}},
		{"count too big", token.Params{"tantoken_count": "1001"}},
		{"count beyond tokeninfo", token.Params{"tantoken_count": "250"}},
		{"2step", token.Params{"2stepinit": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stParamErr(t, stInitErr(t, e, "tan", tc.params), "123456", "1234567")
		})
	}
}

func TestTANHiddenInfo(t *testing.T) {
	e := newEnv(t)
	tok, _ := e.initToken(t, "tan", "", token.Params{"tans": "123456"})
	for k := range tok.Info {
		want := strings.HasPrefix(k, "tan.tan")
		if token.HiddenInfo(tok, k) != want {
			t.Errorf("HiddenInfo(%q) = %v", k, !want)
		}
	}
	if token.HiddenInfo(tok, "tan.count") || !token.HiddenInfo(tok, "tan.tan0") {
		t.Error("HiddenInfo must hide exactly tan.tan*")
	}
}

func FuzzTANList(f *testing.F) {
	for _, s := range []string{"123456 654321", "", " \t\n", "ab cd ef", "123 1234", "ü1 2ß", "\xff\xfe 12"} {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, tans string) {
		tok, detail, err := e.svc.Init(t.Context(), token.InitRequest{Type: "tan", Params: token.Params{"tans": tans}})
		if err != nil {
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("tans %q: %v", tans, err)
			}
			return
		}
		list := strings.Fields(tans)
		otps, _ := detail["otps"].(map[string]string)
		if len(list) == 0 || len(otps) != len(list) || tok.Info["tan.count"] != strconv.Itoa(len(list)) {
			t.Fatalf("tans %q: %d otps, count %q", tans, len(otps), tok.Info["tan.count"])
		}
		for i, s := range list {
			if otps[strconv.Itoa(i)] != s || !tanEntryRe.MatchString(tok.Info["tan.tan"+strconv.Itoa(i)]) {
				t.Fatalf("tans %q: entry %d wrong", tans, i)
			}
		}
	})
}
