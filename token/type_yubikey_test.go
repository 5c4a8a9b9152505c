package token_test

import (
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/token"
)

// The widely published Yubico test OTP (yubico-c tests): key, OTP, private
// id and combined counter.
const (
	ykPublicKey     = "ecde18dbe76fbd0c33330f1c354871db"
	ykPublicOTP     = "dteffujehknhfjbrjnlnldnhcujvddbikngjrtgh"
	ykPublicUID     = "8792ebfe26cc"
	ykPublicCounter = 0x1311
)

// ykSelfMade reads internal/otp/testdata/yubico.txt: key, OTP (public id
// cccjgjgkhcbb, private id a1b2c3d4e5f6, counter 0x010207).
func ykSelfMade(t *testing.T) (key, otpValue string) {
	t.Helper()
	data, err := os.ReadFile("../internal/otp/testdata/yubico.txt")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		return f[0], f[1]
	}
	t.Fatal("no vector in yubico.txt")
	return "", ""
}

// ykMake builds a Yubico OTP: public id pub (modhex) followed by the
// AES-encrypted block of uid, the counters and fixed timestamp and random
// fields.
func ykMake(t *testing.T, keyHex, pub, uidHex string, use uint16, session uint8) string {
	t.Helper()
	key, _ := hex.DecodeString(keyHex)
	uid, _ := hex.DecodeString(uidHex)
	s, err := otp.EncodeYubico(otp.YubicoToken{PublicID: pub, PrivateID: uid, UseCounter: use, SessionCounter: session, Timestamp: 0x054321, Random: 0x1234}, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestYubikeyEnroll(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		params token.Params
	}{
		{"NoKey", token.Params{}},
		{"ShortKey", token.Params{"otpkey": "00112233445566778899aabbccddee"}},
		{"LongKey", token.Params{"otpkey": rfcKey}},
		{"NotHex", token.Params{"otpkey": "zz112233445566778899aabbccddeeff"}},
		{"BadPrefix", token.Params{"otpkey": ykPublicKey, "yubikey.prefix": "abcdef"}},
		{"OddPrefix", token.Params{"otpkey": ykPublicKey, "yubikey.prefix": "ccc"}},
		{"LongPrefix", token.Params{"otpkey": ykPublicKey, "yubikey.prefix": strings.Repeat("cc", 17)}},
		{"BadUID", token.Params{"otpkey": ykPublicKey, "yubikey.uid": "8792ebfe26"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.Init(t.Context(), token.InitRequest{Type: "yubikey", Params: tc.params})
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("err %v, want a parameter error", err)
			}
		})
	}
	t.Run("GenkeyAndOtpkey", func(t *testing.T) {
		_, _, err := e.svc.Init(t.Context(), token.InitRequest{Type: "yubikey", Params: token.Params{"genkey": "1", "otpkey": ykPublicKey}})
		if err != token.ErrGenkeyAndOtpkey {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("Genkey", func(t *testing.T) {
		tok, detail := e.initToken(t, "yubikey", "", token.Params{"genkey": "1"})
		if !strings.HasPrefix(tok.Serial, "UBAM") || tok.OTPLen != 44 || tok.Info["tokenkind"] != "hardware" {
			t.Errorf("token %+v", tok)
		}
		if len(seedOf(t, detail)) != 16 {
			t.Error("the generated AES key is not 16 bytes")
		}
	})
	t.Run("PrefixSetsOTPLen", func(t *testing.T) {
		tok, _ := e.initToken(t, "yubikey", "", token.Params{"otpkey": ykPublicKey, "yubikey.prefix": "DTEFFUJE", "yubikey.uid": ykPublicUID})
		if tok.OTPLen != 40 || tok.Info["yubikey.prefix"] != "dteffuje" || tok.Info["yubikey.uid"] != ykPublicUID {
			t.Errorf("token %+v", tok)
		}
	})
}

func TestYubikeyKnownAnswers(t *testing.T) {
	selfKey, selfOTP := ykSelfMade(t)
	for _, tc := range []struct {
		name    string
		params  token.Params
		otp     string
		counter uint64
	}{
		{"PublicVector", token.Params{"otpkey": ykPublicKey, "yubikey.prefix": "dteffuje", "yubikey.uid": ykPublicUID}, ykPublicOTP, ykPublicCounter},
		{"PublicVectorNoInfo", token.Params{"otpkey": ykPublicKey}, ykPublicOTP, ykPublicCounter},
		{"SelfMade", token.Params{"otpkey": selfKey, "yubikey.prefix": "cccjgjgkhcbb", "yubikey.uid": "a1b2c3d4e5f6"}, selfOTP, 0x010207},
		{"SelfMadeCapsLock", token.Params{"otpkey": selfKey, "yubikey.prefix": "cccjgjgkhcbb"}, strings.ToUpper(selfOTP), 0x010207},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tok, _ := e.initToken(t, "yubikey", "UBAM0001", tc.params)
			r, err := e.svc.CheckOTP(t.Context(), tok.Serial, tc.otp, nil)
			if err != nil || !r.OK {
				t.Fatalf("CheckOTP = %+v, %v", r, err)
			}
			if r.Token.Count != tc.counter {
				t.Errorf("stored counter %#x, want %#x", r.Token.Count, tc.counter)
			}
			// The same OTP again is a replay.
			r, err = e.svc.CheckOTP(t.Context(), tok.Serial, tc.otp, nil)
			if err != nil || r.OK || r.Message != token.MsgReplayed {
				t.Fatalf("replay: %+v, %v", r, err)
			}
		})
	}
}

func TestYubikeyChecks(t *testing.T) {
	const key = "00112233445566778899aabbccddeeff"
	const pub, uid = "vvcccccccccb", "010203040506"
	e := newEnv(t)
	ctx := t.Context()
	tok, _ := e.initToken(t, "yubikey", "UBAM0002", token.Params{"otpkey": key, "yubikey.prefix": pub, "yubikey.uid": uid})
	check := func(value string) token.Result {
		t.Helper()
		r, err := e.svc.CheckOTP(ctx, tok.Serial, value, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	if r := check(ykMake(t, key, pub, uid, 5, 3)); !r.OK || r.Token.Count != 5<<8|3 {
		t.Fatalf("first OTP: %+v", r)
	}
	// A later OTP of the same session and one of a later power-up pass.
	if r := check(ykMake(t, key, pub, uid, 5, 4)); !r.OK {
		t.Fatalf("next session OTP: %+v", r)
	}
	if r := check(ykMake(t, key, pub, uid, 6, 0)); !r.OK || r.Token.Count != 6<<8 {
		t.Fatalf("next use OTP: %+v", r)
	}
	refused := []struct {
		name, otp string
	}{
		{"Older", ykMake(t, key, pub, uid, 5, 200)},
		{"Same", ykMake(t, key, pub, uid, 6, 0)},
		{"WrongPrefix", ykMake(t, key, "vvccccccccdd", uid, 9, 0)},
		{"NoPrefix", ykMake(t, key, "", uid, 9, 0)},
		{"WrongUID", ykMake(t, key, pub, "060504030201", 9, 0)},
		{"WrongKey", ykMake(t, "ffeeddccbbaa99887766554433221100", pub, uid, 9, 0)},
		{"NotModhex", pub + strings.Repeat("x", 32)},
		{"Short", pub + "cbdefghijklnrtuv"},
		{"Empty", ""},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if r := check(tc.otp); r.OK {
				t.Fatalf("accepted: %+v", r)
			}
		})
	}
	if r := check(ykMake(t, key, pub, uid, 9, 0)); !r.OK {
		t.Fatalf("a good OTP after the failures: %+v", r)
	}
}

func TestYubikeyParallelSameOTPOnce(t *testing.T) {
	const key = "00112233445566778899aabbccddeeff"
	e := newEnv(t)
	tok, _ := e.initToken(t, "yubikey", "UBAM0003", token.Params{"otpkey": key})
	value := ykMake(t, key, "vvcccccccccc", "010203040506", 1, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wg.Go(func() {
			r, err := e.svc.CheckOTP(t.Context(), tok.Serial, value, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if r.OK {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != 1 {
		t.Fatalf("%d successes, want exactly 1", ok)
	}
}
