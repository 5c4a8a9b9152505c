package secret_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
)

func newSealer(t testing.TB, keys ...[]byte) *secret.Sealer {
	t.Helper()
	s, err := secret.NewSealer(nil, keys...)
	if err != nil {
		t.Fatalf("NewSealer: %v", err)
	}
	return s
}

func keyID(key []byte) byte {
	sum := sha256.Sum256(key)
	return sum[0]
}

var recordAD = []string{"tokens", "HOTP1", "seed"}

func TestSealOpenRoundTrip(t *testing.T) {
	s := newSealer(t, testKey(1))
	for _, tc := range []struct {
		name      string
		plaintext []byte
		ad        []string
	}{
		{"seed", []byte("12345678901234567890"), recordAD},
		{"empty plaintext", []byte{}, recordAD},
		{"no ad", []byte("x"), nil},
		{"empty ad part", []byte("x"), []string{""}},
		{"large", bytes.Repeat([]byte{0xa5}, 1<<16), []string{"config", "smtp", "password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := s.Seal(tc.plaintext, tc.ad...)
			if err != nil {
				t.Fatal(err)
			}
			if len(ct) != len(tc.plaintext)+2+12+16 {
				t.Errorf("len = %d, want plaintext+30", len(ct))
			}
			if ct[0] != 1 || ct[1] != keyID(testKey(1)) {
				t.Errorf("header = %x %x, want 01 %02x", ct[0], ct[1], keyID(testKey(1)))
			}
			if len(tc.plaintext) >= 8 && bytes.Contains(ct, tc.plaintext) {
				t.Errorf("ciphertext contains the plaintext")
			}
			pt, err := s.Open(ct, tc.ad...)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(pt, tc.plaintext) {
				t.Fatalf("Open returned other bytes")
			}
		})
	}

	t.Run("fresh nonce each time", func(t *testing.T) {
		a, _ := s.Seal([]byte("same"), recordAD...)
		b, _ := s.Seal([]byte("same"), recordAD...)
		if bytes.Equal(a, b) {
			t.Fatal("two seals of the same value are equal")
		}
	})

	t.Run("injected rand gives the nonce", func(t *testing.T) {
		nonce := bytes.Repeat([]byte{9}, 12)
		s2, err := secret.NewSealer(bytes.NewReader(nonce), testKey(1))
		if err != nil {
			t.Fatal(err)
		}
		ct, err := s2.Seal([]byte("x"), recordAD...)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ct[2:14], nonce) {
			t.Fatalf("nonce = %x", ct[2:14])
		}
		if _, err := s2.Seal([]byte("x")); err == nil {
			t.Fatal("Seal with an exhausted rand succeeded")
		}
	})
}

func TestOpenRefuses(t *testing.T) {
	s := newSealer(t, testKey(1))
	plaintext := []byte("12345678901234567890")
	ct, err := s.Seal(plaintext, recordAD...)
	if err != nil {
		t.Fatal(err)
	}
	mustFail := func(t *testing.T, ct []byte, ad ...string) {
		t.Helper()
		pt, err := s.Open(ct, ad...)
		if err != secret.ErrDecrypt { // exactly the sentinel: uniform
			t.Fatalf("Open = %q, %v; want ErrDecrypt", pt, err)
		}
		if pt != nil {
			t.Fatal("Open returned bytes with its error")
		}
	}

	adCases := []struct {
		name string
		ad   []string
	}{
		{"other bucket", []string{"config", "HOTP1", "seed"}},
		{"other key", []string{"tokens", "HOTP2", "seed"}},
		{"other field", []string{"tokens", "HOTP1", "pin"}},
		{"missing part", []string{"tokens", "HOTP1"}},
		{"extra part", []string{"tokens", "HOTP1", "seed", ""}},
		{"no ad", nil},
		{"concatenated", []string{"tokensHOTP1seed"}},
		{"boundary moved", []string{"token", "sHOTP1", "seed"}},
		{"reordered", []string{"HOTP1", "tokens", "seed"}},
	}
	for _, tc := range adCases {
		t.Run("ad/"+tc.name, func(t *testing.T) { mustFail(t, ct, tc.ad...) })
	}

	t.Run("ad/swapped boundaries", func(t *testing.T) {
		c, err := s.Seal(plaintext, "ab", "c")
		if err != nil {
			t.Fatal(err)
		}
		mustFail(t, c, "a", "bc")
		mustFail(t, c, "abc")
		mustFail(t, c, "ab", "c", "")
		if _, err := s.Open(c, "ab", "c"); err != nil {
			t.Fatalf("right ad: %v", err)
		}
	})

	t.Run("tampered", func(t *testing.T) {
		for i := range ct {
			for _, bit := range []byte{0x01, 0x80} {
				c := bytes.Clone(ct)
				c[i] ^= bit
				t.Run(fmt.Sprintf("byte %d bit %#x", i, bit), func(t *testing.T) { mustFail(t, c, recordAD...) })
			}
		}
	})

	t.Run("truncated", func(t *testing.T) {
		for n := range len(ct) {
			t.Run(fmt.Sprintf("len %d", n), func(t *testing.T) { mustFail(t, ct[:n], recordAD...) })
		}
	})

	t.Run("extended", func(t *testing.T) {
		mustFail(t, append(bytes.Clone(ct), 0), recordAD...)
	})

	t.Run("wrong key", func(t *testing.T) {
		other := newSealer(t, testKey(2))
		if _, err := other.Open(ct, recordAD...); err != secret.ErrDecrypt {
			t.Fatalf("err = %v, want ErrDecrypt", err)
		}
	})

	t.Run("wrong key with the same key id", func(t *testing.T) {
		// The header names the key, the tag still decides.
		k := collidingKey(t, testKey(1))
		other := newSealer(t, k)
		if _, err := other.Open(ct, recordAD...); err != secret.ErrDecrypt {
			t.Fatalf("err = %v, want ErrDecrypt", err)
		}
	})
}

// collidingKey returns a key other than k with the same key id.
func collidingKey(t *testing.T, k []byte) []byte {
	t.Helper()
	want := keyID(k)
	for i := range 1 << 16 {
		sum := sha256.Sum256(fmt.Appendf(nil, "collision %d", i))
		if keyID(sum[:]) == want && !bytes.Equal(sum[:], k) {
			return sum[:]
		}
	}
	t.Fatal("no colliding key found")
	return nil
}

func TestRotation(t *testing.T) {
	oldKey, newKey := testKey(1), testKey(2)
	old := newSealer(t, oldKey)
	rotated := newSealer(t, newKey, oldKey)

	oldCT, err := old.Seal([]byte("seed"), recordAD...)
	if err != nil {
		t.Fatal(err)
	}
	newCT, err := rotated.Seal([]byte("seed"), recordAD...)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		sealer *secret.Sealer
		ct     []byte
		ok     bool
	}{
		{"rotated opens old", rotated, oldCT, true},
		{"rotated opens new", rotated, newCT, true},
		{"old cannot open new", old, newCT, false},
		{"new key alone cannot open old", newSealer(t, newKey), oldCT, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := tc.sealer.Open(tc.ct, recordAD...)
			if tc.ok && (err != nil || string(pt) != "seed") {
				t.Fatalf("Open = %q, %v", pt, err)
			}
			if !tc.ok && !errors.Is(err, secret.ErrDecrypt) {
				t.Fatalf("Open err = %v, want ErrDecrypt", err)
			}
		})
	}

	t.Run("new key seals", func(t *testing.T) {
		if newCT[1] != keyID(newKey) {
			t.Fatalf("key id %02x, want the new key's %02x", newCT[1], keyID(newKey))
		}
	})
}

func TestNewSealerErrors(t *testing.T) {
	k1 := testKey(1)
	for _, tc := range []struct {
		name string
		keys [][]byte
		want []string
	}{
		{"no key", nil, []string{"no key"}},
		{"short key", [][]byte{make([]byte, 16)}, []string{"key 0 has 16 bytes"}},
		{"long key", [][]byte{k1, make([]byte, 33)}, []string{"key 1 has 33 bytes"}},
		{"same key twice", [][]byte{k1, testKey(2), k1}, []string{"keys 0 and 2", "same key id"}},
		{"key id collision", [][]byte{k1, collidingKey(t, k1)}, []string{"keys 0 and 1", "collision"}},
		{"all errors joined", [][]byte{nil, k1, k1}, []string{"key 0 has 0 bytes", "keys 1 and 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := secret.NewSealer(nil, tc.keys...)
			if err == nil {
				t.Fatalf("no error, got %v", s)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCanary(t *testing.T) {
	k1, k2 := testKey(1), testKey(2)
	canary, err := newSealer(t, k1).NewCanary()
	if err != nil {
		t.Fatal(err)
	}
	other, err := newSealer(t, k1).Seal([]byte("authsrv enckey canary v1"), "tokens", "x", "seed")
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		sealer *secret.Sealer
		canary []byte
		ok     bool
	}{
		{"same key", newSealer(t, k1), canary, true},
		{"after rotation", newSealer(t, k2, k1), canary, true},
		{"wrong key", newSealer(t, k2), canary, false},
		{"garbage", newSealer(t, k1), []byte("not a canary"), false},
		{"empty", newSealer(t, k1), nil, false},
		{"other record with canary text", newSealer(t, k1), other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sealer.CheckCanary(tc.canary)
			if tc.ok {
				if err != nil {
					t.Fatalf("CheckCanary: %v", err)
				}
				return
			}
			if !errors.Is(err, secret.ErrWrongKey) {
				t.Fatalf("err = %v, want ErrWrongKey", err)
			}
			if !strings.Contains(err.Error(), "wrong encryption key") {
				t.Errorf("message not clear: %q", err)
			}
		})
	}

	t.Run("message names key ids", func(t *testing.T) {
		err := newSealer(t, k2).CheckCanary(canary)
		for _, w := range []string{fmt.Sprintf("0x%02x", keyID(k1)), fmt.Sprintf("0x%02x", keyID(k2))} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not name key id %s", err, w)
			}
		}
	})
}

func TestSealerRedacted(t *testing.T) {
	k1, k2 := testKey(0x41), bytes.Repeat([]byte{0x5a, 0xc3}, 16)
	s := newSealer(t, k1, k2)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		t.Run(verb, func(t *testing.T) {
			out := fmt.Sprintf(verb, s)
			for _, k := range [][]byte{k1, k2} {
				for _, form := range []string{string(k), hex.EncodeToString(k), strings.ToUpper(hex.EncodeToString(k)), hex.EncodeToString(k[:8]), fmt.Sprint(k[:8])} {
					if strings.Contains(out, form) {
						t.Fatalf("%s shows key material: %q", verb, out)
					}
				}
			}
		})
	}
	t.Run("String names ids", func(t *testing.T) {
		want := fmt.Sprintf("seals with key id 0x%02x, opens key ids 0x%02x, 0x%02x", keyID(k1), keyID(k1), keyID(k2))
		if got := s.String(); !strings.Contains(got, want) {
			t.Fatalf("String() = %q, want it to contain %q", got, want)
		}
		if s.GoString() != s.String() {
			t.Fatal("GoString differs from String")
		}
	})
}

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want bool
	}{
		{"equal", "123456", "123456", true},
		{"differ", "123456", "123457", false},
		{"prefix", "12345", "123456", false},
		{"both empty", "", "", true},
		{"one empty", "", "1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := secret.EqualString(tc.a, tc.b); got != tc.want {
				t.Errorf("EqualString = %v", got)
			}
			if got := secret.Equal([]byte(tc.a), []byte(tc.b)); got != tc.want {
				t.Errorf("Equal = %v", got)
			}
		})
	}
}
