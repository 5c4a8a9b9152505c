package token

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

// retryStore runs every Update function twice, the first run rolled
// back, as group commit may; inTx is set while a function runs.
type retryStore struct {
	store.Store
	inTx atomic.Bool
}

var errRetry = errors.New("rolled back to run again")

func (s *retryStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	run := func(tx store.Tx) error {
		s.inTx.Store(true)
		defer s.inTx.Store(false)
		return fn(tx)
	}
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		if err := run(tx); err != nil {
			return err
		}
		return errRetry
	})
	if !errors.Is(err, errRetry) {
		return err
	}
	return s.Store.Update(ctx, run)
}

// drawn records the images drawn, and fails the test for one drawn
// inside a transaction.
type drawn struct {
	mu       sync.Mutex
	contents []string
}

func countDraws(t *testing.T, st *retryStore) *drawn {
	d := &drawn{}
	old := drawQR
	drawQR = func(content string) (string, error) {
		if st.inTx.Load() {
			t.Errorf("the image of %.20q… was drawn inside the store transaction", content)
		}
		d.mu.Lock()
		d.contents = append(d.contents, content)
		d.mu.Unlock()
		return old(content)
	}
	t.Cleanup(func() { drawQR = old })
	return d
}

func (d *drawn) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.contents
	d.contents = nil
	return out
}

func imageService(t *testing.T) (*Service, *retryStore) {
	t.Helper()
	st := &retryStore{Store: storetest.Open(t)}
	h, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Store: st, Sealer: sealer, Hasher: h}), st
}

// imgOf is the img of a detail entry, "" when it has none.
func imgOf(detail map[string]any, entry string) string {
	d, _ := detail[entry].(map[string]any)
	img, _ := d["img"].(string)
	return img
}

// TestEnrollImagesOnceAfterCommit: an HOTP or TOTP enrollment draws each
// of its three images exactly once, after the commit (never in the
// transaction, which the store runs twice here), and answers them;
// ImagesOf limits them; a refused enrollment and an import draw none.
func TestEnrollImagesOnceAfterCommit(t *testing.T) {
	svc, st := imageService(t)
	d := countDraws(t, st)
	ctx := t.Context()
	for _, typ := range []string{"hotp", "totp"} {
		tok, detail, err := svc.Init(ctx, InitRequest{Type: typ, Params: Params{"genkey": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		got := d.take()
		if len(got) != 3 {
			t.Fatalf("%s: %d images drawn, want 3: %q", typ, len(got), got)
		}
		want := map[string]string{"otpkey": "seed://", "googleurl": "otpauth://" + typ + "/", "oathurl": "oathtoken:///addToken?name=" + tok.Serial}
		for _, entry := range slices.Sorted(maps.Keys(want)) {
			value, _ := detail[entry].(map[string]any)["value"].(string)
			if !strings.HasPrefix(value, want[entry]) {
				t.Errorf("%s %s value %.30q…, want prefix %q", typ, entry, value, want[entry])
			}
			if n := strings.Count(strings.Join(got, "\n")+"\n", value+"\n"); n != 1 {
				t.Errorf("%s %s: its image was drawn %d times", typ, entry, n)
			}
			if !strings.HasPrefix(imgOf(detail, entry), "data:image/png;base64,") {
				t.Errorf("%s %s has no image in the answer", typ, entry)
			}
		}
	}

	_, detail, err := svc.Init(ctx, InitRequest{Type: "totp", Params: Params{"genkey": "1"}, ImagesOf: []string{"googleurl"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.take(); len(got) != 1 || !strings.HasPrefix(got[0], "otpauth://totp/") {
		t.Errorf("ImagesOf googleurl drew %q", got)
	}
	if imgOf(detail, "googleurl") == "" || imgOf(detail, "otpkey") != "" || imgOf(detail, "oathurl") != "" {
		t.Errorf("ImagesOf googleurl answered images googleurl %t, otpkey %t, oathurl %t",
			imgOf(detail, "googleurl") != "", imgOf(detail, "otpkey") != "", imgOf(detail, "oathurl") != "")
	}

	// Refused in the transaction: no token, no image.
	zero := 0
	_, _, err = svc.Init(ctx, InitRequest{Type: "hotp", Params: Params{"genkey": "1"}, Realms: []string{"r1"},
		Limits: Limits{Realm: "r1", PerRealm: &zero}})
	if !errors.Is(err, ErrMaxPerRealm) {
		t.Fatalf("init beyond max_token_per_realm: %v", err)
	}
	if got := d.take(); len(got) != 0 {
		t.Errorf("a refused enrollment drew %d images", len(got))
	}

	var recs []ImportRecord
	for i := range 1200 {
		recs = append(recs, ImportRecord{Serial: fmt.Sprintf("IMG%05d", i), Type: []string{"hotp", "totp"}[i%2], Key: []byte("12345678901234567890")})
	}
	if n, failed := svc.Import(ctx, recs, nil); n != len(recs) || len(failed) != 0 {
		t.Fatalf("imported %d, failed %v", n, failed)
	}
	if got := d.take(); len(got) != 0 {
		t.Errorf("an import of %d tokens drew %d images", len(recs), len(got))
	}
}

// TestLostDrawsNoImage: the temporary pw token of /token/lost answers no
// QR code, so none is drawn (it would be an image of the password).
func TestLostDrawsNoImage(t *testing.T) {
	svc, st := imageService(t)
	ctx := t.Context()
	owner := &user.User{Login: "alice", Realm: "r1", Resolver: "res", UID: "1"}
	tok, _, err := svc.Init(ctx, InitRequest{Type: "hotp", Params: Params{"genkey": "1"}, Owner: owner, NoImages: true})
	if err != nil {
		t.Fatal(err)
	}
	d := countDraws(t, st)
	res, err := svc.Lost(ctx, tok.Serial, LostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Serial != "lost"+tok.Serial || res.Password == "" {
		t.Fatalf("lost: %+v", res)
	}
	if got := d.take(); len(got) != 0 {
		t.Fatalf("lost drew %d images", len(got))
	}
}
