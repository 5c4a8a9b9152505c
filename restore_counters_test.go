package authsrv_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/token"
)

// TestRestoreRollsCountersForward: OTP values used after a backup must
// not become valid again when the backup is restored (reliability
// decision 4), unless the counters are kept on purpose.
func TestRestoreRollsCountersForward(t *testing.T) {
	ctx := t.Context()
	key := []byte("12345678901234567890")
	src := t.TempDir()
	s := newServer(t, src)
	for _, typ := range []string{"hotp", "totp"} {
		if _, _, err := s.Tokens().Init(ctx, token.InitRequest{Type: typ, Serial: strings.ToUpper(typ),
			Params: token.Params{"otpkey": "3132333435363738393031323334353637383930"}}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := s.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	// After the backup: HOTP counter 0 and the current TOTP value are used.
	hotp0 := otp.HOTP(key, 0, 6, otp.SHA1)
	totpNow := otp.TOTP(key, time.Now(), 30, 0, 6, otp.SHA1)
	for serial, v := range map[string]string{"HOTP": hotp0, "TOTP": totpNow} {
		if r, err := s.Tokens().CheckOTP(ctx, serial, v, nil); err != nil || !r.OK {
			t.Fatalf("%s before restore: %+v %v", serial, r, err)
		}
	}
	for _, keep := range []bool{false, true} {
		dst := filepath.Join(t.TempDir(), "restored")
		m, err := authsrv.Restore(bytes.NewReader(buf.Bytes()), dst, authsrv.RestoreOptions{KeepCounters: keep})
		if err != nil {
			t.Fatal(err)
		}
		r := newServer(t, dst)
		for serial, v := range map[string]string{"HOTP": hotp0, "TOTP": totpNow} {
			res, err := r.Tokens().CheckOTP(ctx, serial, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != keep {
				t.Errorf("keep=%v: %s value used after the backup accepted=%v", keep, serial, res.OK)
			}
		}
		if keep {
			if m.RolledForward != 0 {
				t.Errorf("keep-counters moved %d tokens", m.RolledForward)
			}
			_ = r.Close()
			continue
		}
		if m.RolledForward != 2 {
			t.Errorf("rolled forward %d tokens, want 2", m.RolledForward)
		}
		res, err := r.Audit().Search(ctx, audit.Query{Filters: map[string]string{"action": "RESTORE"}})
		if err != nil || res.Count != 1 {
			t.Errorf("restore audit entry: %+v %v", res, err)
		}
		// A fresh value beyond the advanced HOTP counter still works.
		if res, _ := r.Tokens().CheckOTP(ctx, "HOTP", otp.HOTP(key, 10, 6, otp.SHA1), nil); !res.OK {
			t.Error("HOTP value after the advanced counter refused")
		}
		_ = r.Close()
	}
}
