package authsrv_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
)

// testClock is a settable clock for WithClock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ringOnDisk reads the data directory's ring file: key id → key.
func ringOnDisk(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, authsrv.JWTKeysFile))
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Keys []struct {
			KID string `json:"kid"`
			Key []byte `json:"key"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, k := range rf.Keys {
		out[k.KID] = k.Key
	}
	return out
}

// signWith signs claims with HS256 and key, with header kid (none when
// kid is nil).
func signWith(t *testing.T, key []byte, kid any, c jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	if kid != nil {
		tok.Header["kid"] = kid
	}
	raw, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestJWTKeyRotation is S11 with B6's key cases: with an injected clock,
// a token signed with key A keeps verifying after a rotation until it
// expires, new tokens carry key B's kid, A is dropped from the ring file
// once the last token it could have signed expired (a long-lived API key
// included), and tokens naming an unknown or dropped key, with alg none or
// with a tampered payload are refused.
func TestJWTKeyRotation(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	clk := &testClock{t: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	const life = time.Hour
	open := func() *authsrv.Server {
		return newServer(t, dir, authsrv.WithClock(clk.now), authsrv.WithJWTLifetime(life))
	}
	s := open()
	session := func() jwt.RegisteredClaims {
		return jwt.RegisteredClaims{Subject: "admin", ExpiresAt: jwt.NewNumericDate(clk.now().Add(life))}
	}
	verify := func(s *authsrv.Server, raw string) error { return s.ParseJWT(raw, &jwt.RegisteredClaims{}) }
	keyA, err := os.ReadFile(filepath.Join(dir, authsrv.JWTKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, authsrv.JWTKeysFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a fresh data directory has a ring file before any rotation: %v", err)
	}
	ring := s.JWTKeys()
	if len(ring) != 1 || !ring[0].Current || !ring[0].Legacy {
		t.Fatalf("fresh ring %+v", ring)
	}
	kidA := ring[0].KID

	tokA, err := s.IssueJWT(session())
	if err != nil {
		t.Fatal(err)
	}
	if got := jwtHeader(t, tokA)["kid"]; got != kidA {
		t.Fatalf("token kid %v, want %s", got, kidA)
	}
	// A token from before the upgrade: no kid, the jwtkey file's key.
	preUpgrade := signWith(t, keyA, nil, session())
	// An API key outlives sessions: the ring records it (and the ring
	// file appears for it).
	apiKeyA, err := s.IssueJWT(jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(clk.now().Add(30 * 24 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}

	clk.add(10 * time.Minute)
	kB, err := s.Ops().RotateJWTKey(ctx, caller.Caller{}, authsrv.JWTRotation{})
	if err != nil {
		t.Fatal(err)
	}
	if kB.KID == kidA || !kB.Current {
		t.Fatalf("rotated key %+v", kB)
	}
	fi, err := os.Stat(filepath.Join(dir, authsrv.JWTKeysFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ring file: %v, mode %v", err, fi)
	}
	if rows := auditRows(t, s); rows[len(rows)-1]["action"] != "POST /jwt/rotate" || !strings.Contains(rows[len(rows)-1]["info"].(string), kB.KID) {
		t.Errorf("rotation audit entry %v", rows[len(rows)-1])
	}
	if _, err := s.Ops().RotateJWTKey(ctx, caller.Caller{Role: caller.Admin, Name: "admin"}, authsrv.JWTRotation{}); err == nil {
		t.Error("an API administrator rotated the JWT key")
	}
	tokB, err := s.IssueJWT(session())
	if err != nil {
		t.Fatal(err)
	}
	if got := jwtHeader(t, tokB)["kid"]; got != kB.KID {
		t.Fatalf("token after rotation has kid %v, want %s", got, kB.KID)
	}
	keyB := ringOnDisk(t, dir)[kB.KID]
	for name, raw := range map[string]string{"A's session": tokA, "before the upgrade": preUpgrade, "A's API key": apiKeyA, "B's": tokB} {
		if err := verify(s, raw); err != nil {
			t.Errorf("%s token after the rotation: %v", name, err)
		}
	}

	// B6: what the ring refuses whatever the clock.
	claims := session()
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	noneKID := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, claims)
		tok.Header["kid"] = kB.KID
		raw, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}()
	head, _, _ := strings.Cut(tokB, ".")
	sig := tokB[strings.LastIndex(tokB, ".")+1:]
	forgedPayload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"root","exp":` + jsonNum(clk.now().Add(life).Unix()) + `}`))
	for _, tc := range []struct {
		name string
		raw  string
		want error
	}{
		{"unknown kid", signWith(t, bytes.Repeat([]byte{9}, 32), "0011223344556677", claims), authsrv.ErrJWTUnknownKey},
		{"unknown kid, signed with B's key", signWith(t, keyB, "0011223344556677", claims), authsrv.ErrJWTUnknownKey},
		{"kid not a string", signWith(t, keyB, 42, claims), authsrv.ErrJWTUnknownKey},
		{"empty kid", signWith(t, keyB, "", claims), authsrv.ErrJWTUnknownKey},
		{"B's kid, another key", signWith(t, keyA, kB.KID, claims), jwt.ErrTokenSignatureInvalid},
		{"no kid, B's key", signWith(t, keyB, nil, claims), jwt.ErrTokenSignatureInvalid},
		{"alg none", none, authsrv.ErrJWTAlgorithm},
		{"alg none with B's kid", noneKID, authsrv.ErrJWTAlgorithm},
		{"tampered payload", head + "." + forgedPayload + "." + sig, jwt.ErrTokenSignatureInvalid},
	} {
		if err := verify(s, tc.raw); !errors.Is(err, tc.want) {
			t.Errorf("%s: ParseJWT = %v, want %v", tc.name, err, tc.want)
		}
	}

	// A's session token expires 50 minutes after the rotation: A still
	// verifies up to then (the API key shows it), the session token is
	// then refused by its expiry.
	clk.add(49 * time.Minute)
	if err := verify(s, tokA); err != nil {
		t.Errorf("A's token a minute before its expiry: %v", err)
	}
	clk.add(2 * time.Minute)
	if err := verify(s, tokA); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("A's token after its expiry: %v, want expired", err)
	}
	if err := verify(s, apiKeyA); err != nil {
		t.Errorf("A's API key within its validity: %v", err)
	}
	tokB2, err := s.IssueJWT(session())
	if err != nil {
		t.Fatal(err)
	}

	// Past the API key's expiry A's window is over: it verifies nothing,
	// the retention run drops it from the file, and the jwtkey file that
	// held it goes as well.
	clk.add(30 * 24 * time.Hour)
	aForged := signWith(t, keyA, kidA, jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(clk.now().Add(life))})
	aForgedNoKID := signWith(t, keyA, nil, jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(clk.now().Add(life))})
	for name, raw := range map[string]string{"dropped kid": aForged, "no kid, dropped legacy key": aForgedNoKID} {
		if err := verify(s, raw); !errors.Is(err, authsrv.ErrJWTUnknownKey) {
			t.Errorf("%s: %v, want ErrJWTUnknownKey", name, err)
		}
	}
	if _, ok := ringOnDisk(t, dir)[kidA]; !ok {
		t.Fatal("A left the ring file before a retention run or a rotation")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Run(cctx); err != nil { // one pass of the background work
		t.Fatal(err)
	}
	onDisk := ringOnDisk(t, dir)
	if _, ok := onDisk[kidA]; ok || len(onDisk) != 1 {
		t.Errorf("ring file after A's window: %d keys, A present %v", len(onDisk), ok)
	}
	if _, err := os.Stat(filepath.Join(dir, authsrv.JWTKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dropped legacy key's jwtkey file is still there: %v", err)
	}

	// The ring survives a restart: B signs, A stays gone.
	_ = s.Close()
	s = open()
	if ring := s.JWTKeys(); len(ring) != 1 || ring[0].KID != kB.KID {
		t.Fatalf("ring after restart %+v", ring)
	}
	clk.add(-30 * 24 * time.Hour) // B's tokens of before, within their validity
	if err := verify(s, tokB2); err != nil {
		t.Errorf("B's token after a restart: %v", err)
	}
	if err := verify(s, aForged); !errors.Is(err, authsrv.ErrJWTUnknownKey) {
		t.Errorf("A's kid after a restart: %v", err)
	}
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestJWTRotateDropOld: a rotation that drops the older keys refuses every
// token they signed at once, API keys included, and leaves one key in the
// ring file.
func TestJWTRotateDropOld(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := newServer(t, dir)
	exp := func(d time.Duration) jwt.RegisteredClaims {
		return jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(d))}
	}
	session, err := s.IssueJWT(exp(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	apiKey, err := s.IssueJWT(exp(365 * 24 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().RotateJWTKey(ctx, caller.Caller{}, authsrv.JWTRotation{}); err != nil {
		t.Fatal(err)
	}
	second, err := s.IssueJWT(exp(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.Ops().RotateJWTKey(ctx, caller.Caller{}, authsrv.JWTRotation{DropOld: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string]string{"first key's session": session, "first key's API key": apiKey, "second key's session": second} {
		if err := s.ParseJWT(raw, &jwt.RegisteredClaims{}); !errors.Is(err, authsrv.ErrJWTUnknownKey) {
			t.Errorf("%s: %v, want ErrJWTUnknownKey", name, err)
		}
	}
	if onDisk := ringOnDisk(t, dir); len(onDisk) != 1 || onDisk[k.KID] == nil {
		t.Errorf("ring file holds %d keys", len(onDisk))
	}
	if _, err := os.Stat(filepath.Join(dir, authsrv.JWTKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("jwtkey file after -drop-old: %v", err)
	}
	if rows := auditRows(t, s); !strings.Contains(rows[len(rows)-1]["info"].(string), "dropped") {
		t.Errorf("audit %v", rows[len(rows)-1])
	}
}

// TestJWTRingConcurrency: tokens issued and verified while the ring
// rotates (run with -race).
func TestJWTRingConcurrency(t *testing.T) {
	s := newServer(t, t.TempDir())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				raw, err := s.IssueJWT(jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))})
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.ParseJWT(raw, &jwt.RegisteredClaims{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 5 {
		if _, err := s.Ops().RotateJWTKey(t.Context(), caller.Caller{}, authsrv.JWTRotation{}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if n := len(s.JWTKeys()); n != 6 {
		t.Errorf("%d keys, want 6 (none expired yet)", n)
	}
}

// TestJWTRotateGivenKey: a key the program gave is the program's to
// rotate.
func TestJWTRotateGivenKey(t *testing.T) {
	s := configServer(t)
	if _, err := s.Ops().RotateJWTKey(t.Context(), caller.Caller{}, authsrv.JWTRotation{}); !errors.Is(err, authsrv.ErrJWTKeyGiven) {
		t.Fatalf("rotate = %v, want ErrJWTKeyGiven", err)
	}
}

// TestJWTRingFile: a ring file that group or others may read, or that
// does not parse, stops the start.
func TestJWTRingFile(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	if _, err := s.Ops().RotateJWTKey(t.Context(), caller.Caller{}, authsrv.JWTRotation{}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	path := filepath.Join(dir, authsrv.JWTKeysFile)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		mode os.FileMode
		want string
	}{
		{"readable by others", good, 0o644, "group or others"},
		{"garbage", []byte("{"), 0o600, "not readable"},
		{"no current key", bytes.Replace(good, []byte(`"created"`), []byte(`"retired": "2026-01-01T00:00:00Z", "verify_until": "2026-01-01T00:00:00Z", "created"`), -1), 0o600, "current key"},
		{"kid of another key", bytes.Replace(good, []byte(`"kid": "`), []byte(`"kid": "00`), 1), 0o600, "does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.data, tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := authsrv.New(authsrv.WithDataDir(dir), cheapKDF)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// TestBackupCarriesJWTRing is F6 across a rotation: a backup holds the
// ring, so tokens of the current and the retired key verify on the
// restored directory; a backup from before the ring (jwtkey only)
// restored over a directory with a ring brings its key back and removes
// the stale ring.
func TestBackupCarriesJWTRing(t *testing.T) {
	ctx := t.Context()
	src := t.TempDir()
	s := newServer(t, src)
	exp := jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}
	old, err := s.IssueJWT(exp)
	if err != nil {
		t.Fatal(err)
	}
	var legacy bytes.Buffer
	if _, err := s.Backup(ctx, &legacy); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().RotateJWTKey(ctx, caller.Caller{}, authsrv.JWTRotation{}); err != nil {
		t.Fatal(err)
	}
	cur, err := s.IssueJWT(exp)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	m, err := s.Backup(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(m.Contents, ","), authsrv.JWTKeysFile) {
		t.Errorf("manifest contents %v", m.Contents)
	}
	dst := filepath.Join(t.TempDir(), "d")
	if _, err := authsrv.Restore(bytes.NewReader(buf.Bytes()), dst, authsrv.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	r := newServer(t, dst)
	for name, raw := range map[string]string{"retired key's": old, "current key's": cur} {
		if err := r.ParseJWT(raw, &jwt.RegisteredClaims{}); err != nil {
			t.Errorf("%s token on the restored directory: %v", name, err)
		}
	}
	next, err := r.IssueJWT(exp)
	if err != nil || jwtHeader(t, next)["kid"] != jwtHeader(t, cur)["kid"] {
		t.Errorf("the restored directory signs with %v, want the current key %v (%v)", jwtHeader(t, next)["kid"], jwtHeader(t, cur)["kid"], err)
	}
	_ = r.Close()

	// A backup of the old format: only the jwtkey member.
	var oldFormat bytes.Buffer
	tw := tar.NewWriter(&oldFormat)
	tr := tar.NewReader(bytes.NewReader(legacy.Bytes()))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == authsrv.JWTKeysFile {
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := authsrv.Restore(&oldFormat, dst, authsrv.RestoreOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, authsrv.JWTKeysFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale ring file stayed after restoring a backup without one: %v", err)
	}
	r = newServer(t, dst)
	if err := r.ParseJWT(old, &jwt.RegisteredClaims{}); err != nil {
		t.Errorf("token of the old backup's key: %v", err)
	}
	if err := r.ParseJWT(cur, &jwt.RegisteredClaims{}); !errors.Is(err, authsrv.ErrJWTUnknownKey) {
		t.Errorf("token of a key the old backup does not know: %v", err)
	}
}
