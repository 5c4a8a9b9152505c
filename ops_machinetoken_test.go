package authsrv_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
)

// TestMachineTokensWithoutHTTP attaches an sshkey token to a service ID
// and reads its key back through the library, as an embedder would.
func TestMachineTokensWithoutHTTP(t *testing.T) {
	ctx := t.Context()
	key := []byte(strings.Repeat("k", 32))
	s, err := authsrv.New(authsrv.WithStore(storetest.Open(t)), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), cheapKDF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	pub, err := ssh.NewPublicKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public())
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " ops@test"
	if _, _, err := s.Tokens().Init(ctx, token.InitRequest{Type: "sshkey", Serial: "SSHK9", Params: token.Params{"sshkey": line}}); err != nil {
		t.Fatal(err)
	}
	ops, local := s.Ops(), caller.Caller{}

	if id, err := ops.SetServiceID(ctx, local, "webserver", "web"); err != nil || id != 1 {
		t.Fatalf("SetServiceID = %d, %v", id, err)
	}
	sids, err := ops.ServiceIDs(ctx, local, "")
	if err != nil || len(sids) != 1 || sids[0].Name != "webserver" {
		t.Fatalf("ServiceIDs = %+v, %v", sids, err)
	}
	id, err := ops.AttachMachineToken(ctx, local, machine.AttachRequest{Serial: "SSHK9", Application: "ssh",
		Options: map[string]string{"service_id": "webserver", "user": "root"}})
	if err != nil || id < 1 {
		t.Fatalf("AttachMachineToken = %d, %v", id, err)
	}
	items, err := ops.MachineAuthItems(ctx, local, machine.AuthItemRequest{Hostname: "h", Application: "ssh",
		Filter: map[string]string{"service_id": "webserver", "user": "root"}})
	want := map[string][]map[string]any{"ssh": {{"sshkey": line, "service_id": "webserver", "user": "root", "serial": nil}}}
	if err != nil || !reflect.DeepEqual(items, want) {
		t.Fatalf("MachineAuthItems = %v, %v; want %v", items, err, want)
	}

	// A user is refused the administrators' operations.
	alice := caller.Caller{Role: caller.User, Name: "alice", Realm: "realm1"}
	if _, err := ops.AttachMachineToken(ctx, alice, machine.AttachRequest{Serial: "SSHK9", Application: "ssh"}); !apierr.Is(err, apierr.AuthMissingRight) {
		t.Errorf("user attach: %v", err)
	}
	if err := ops.DeleteServiceID(ctx, alice, "webserver"); !apierr.Is(err, apierr.AuthMissingRight) {
		t.Errorf("user delete service ID: %v", err)
	}

	// The audit holds the operations.
	found, err := s.Audit().Search(ctx, audit.Query{Filters: map[string]string{"serial": "SSHK9", "action": "POST /machine/token"}})
	if err != nil || found.Count != 1 {
		t.Errorf("audit entries of the attach = %+v, %v", found, err)
	}

	// Deleting the token drops the machine token in the same commit.
	if err := s.Tokens().Delete(ctx, "SSHK9"); err != nil {
		t.Fatal(err)
	}
	res, err := ops.MachineTokens(ctx, local, machine.Query{})
	if err != nil || len(res.Tokens) != 0 {
		t.Errorf("after the delete: %+v, %v", res.Tokens, err)
	}
	if err := ops.DeleteServiceID(ctx, local, "webserver"); err != nil {
		t.Fatal(err)
	}
	if err := ops.DeleteServiceID(ctx, local, "webserver"); !errors.Is(err, machine.ErrServiceIDNotFound) {
		t.Errorf("second delete: %v", err)
	}
}
