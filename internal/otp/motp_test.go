package otp_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
)

type motpVector struct {
	secret, pin string
	unix        int64
	otp         string
}

// loadMOTP reads testdata/motp.txt, computed once with python3 hashlib by the
// script in its header.
func loadMOTP(t *testing.T) []motpVector {
	t.Helper()
	f, err := os.Open("testdata/motp.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []motpVector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 4 {
			t.Fatalf("bad line %q", line)
		}
		unix, err := strconv.ParseInt(fs[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, motpVector{fs[0], fs[1], unix, fs[3]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	return vs
}

func TestMOTPKnownAnswers(t *testing.T) {
	for _, v := range loadMOTP(t) {
		t.Run(v.secret+"/"+v.pin+"/"+strconv.FormatInt(v.unix, 10), func(t *testing.T) {
			now := time.Unix(v.unix, 0)
			if got := otp.MOTP(v.secret, v.pin, now); got != v.otp {
				t.Errorf("MOTP = %q, want %q", got, v.otp)
			}
			step, ok := otp.CheckMOTP(v.secret, v.pin, v.otp, now, 0, 0, false)
			if !ok || step != uint64(v.unix/10) {
				t.Errorf("CheckMOTP = %d, %v; want %d, true", step, ok, v.unix/10)
			}
		})
	}
}

func TestCheckMOTP(t *testing.T) {
	const secret, pin = "1234567890abcdef", "1234"
	now := time.Unix(1767225600, 0)
	T := uint64(1767225600 / 10)
	at := func(d time.Duration) string { return otp.MOTP(secret, pin, now.Add(d)) }
	tests := []struct {
		name     string
		otp      string
		pin      string
		window   int
		lastUsed uint64
		hasLast  bool
		want     uint64
		wantOK   bool
	}{
		{"now", at(0), pin, 180, 0, false, T, true},
		{"oldest step T-w", at(-180 * time.Second), pin, 180, 0, false, T - 18, true},
		{"newest step T+w (symmetric)", at(180 * time.Second), pin, 180, 0, false, T + 18, true},
		{"before the window", at(-190 * time.Second), pin, 180, 0, false, 0, false},
		{"after the window", at(190 * time.Second), pin, 180, 0, false, 0, false},
		{"window 0 checks now only", at(10 * time.Second), pin, 0, 0, false, 0, false},
		{"upper-case hex", strings.ToUpper(at(0)), pin, 180, 0, false, T, true},
		{"wrong pin", at(0), "4321", 180, 0, false, 0, false},
		{"replay of last used step", at(0), pin, 180, T, true, 0, false},
		{"newer than last used step", at(10 * time.Second), pin, 180, T, true, T + 1, true},
		{"lastUsed ignored without hasLast", at(0), pin, 180, T, false, T, true},
		{"wrong length", at(0)[:5], pin, 180, 0, false, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			step, ok := otp.CheckMOTP(secret, tc.pin, tc.otp, now, tc.window, tc.lastUsed, tc.hasLast)
			if step != tc.want || ok != tc.wantOK {
				t.Errorf("CheckMOTP = %d, %v; want %d, %v", step, ok, tc.want, tc.wantOK)
			}
		})
	}
}
