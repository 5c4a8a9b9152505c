package authsrv_test

import (
	"crypto/elliptic"
	"crypto/x509/pkix"
	"path/filepath"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caconnector/catest"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/token"
)

func caAuditCount(t *testing.T, s *authsrv.Server, action, success string) int {
	t.Helper()
	res, err := s.Audit().Search(t.Context(), audit.Query{Filters: map[string]string{"action": action, "success": success}, PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	return res.Count
}

// TestCAConnectorOps drives the CA connectors and the certificate token as
// a Go program does: through Ops, with rights, audit and the CRL.
func TestCAConnectorOps(t *testing.T) {
	ctx := t.Context()
	s := configServer(t)
	admin := caller.Caller{Role: caller.Admin, Name: "admin"}
	ca := catest.New(t, "ops CA")
	params := map[string]string{"cakey": ca.KeyPath, "cacert": ca.CertPath, "CRL": filepath.Join(ca.Dir, "crl.pem")}

	// A key path that cannot be read: refused, audited as a failure,
	// nothing stored.
	bad := map[string]string{"cakey": filepath.Join(ca.Dir, "nope.key"), "cacert": ca.CertPath}
	if _, err := s.Ops().SetCAConnector(ctx, admin, "ca1", "local", bad); !apierr.Is(err, apierr.CA) {
		t.Fatalf("SetCAConnector with a missing key = %v", err)
	}
	if n := caAuditCount(t, s, "POST /caconnector/ca1", "0"); n != 1 {
		t.Errorf("failed writes audited: %d", n)
	}
	if list, err := s.Ops().CAConnectors(ctx, admin, ""); err != nil || len(list) != 0 {
		t.Fatalf("connectors after the refusal: %v, %v", list, err)
	}

	id, err := s.Ops().SetCAConnector(ctx, admin, "ca1", "local", params)
	if err != nil || id != 1 {
		t.Fatalf("SetCAConnector = %d, %v", id, err)
	}
	if n := caAuditCount(t, s, "POST /caconnector/ca1", "1"); n != 1 {
		t.Errorf("successful writes audited: %d", n)
	}

	// Who may enroll certificates sees the connectors without their
	// configuration.
	names, err := s.Ops().CAConnectorsForEnrollment(ctx, admin)
	if err != nil || len(names) != 1 || names[0].Name != "ca1" || len(names[0].Data) != 0 {
		t.Errorf("CAConnectorsForEnrollment = %+v, %v", names, err)
	}
	// The user policy "base" grants no enrollCERTIFICATE.
	if _, err := s.Ops().CAConnectorsForEnrollment(ctx, caller.Caller{Role: caller.User, Name: "alice", Realm: "realm1"}); !apierr.Is(err, apierr.Policy) {
		t.Errorf("a user without enrollCERTIFICATE = %v", err)
	}

	// Enroll a certificate token from a request, then revoke it: the CRL
	// lists its certificate.
	key := catest.ECKey(t, elliptic.P384())
	res, err := s.Ops().InitToken(ctx, admin, authsrv.TokenInit{Type: "certificate", Realm: "realm1",
		Params: token.Params{"request": catest.Request(t, key, pkix.Name{CommonName: "alice"}), "ca": "ca1"}})
	if err != nil {
		t.Fatal(err)
	}
	cert := catest.ParseCert(t, res.Detail["certificate"].(string))
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatalf("certificate not signed by the CA: %v", err)
	}
	if _, err := s.Ops().RevokeTokens(ctx, admin, authsrv.TokenSelect{Serials: []string{res.Serial}}); err != nil {
		t.Fatal(err)
	}
	crl := ca.ReadCRL(t, params["CRL"])
	if !catest.Listed(crl, cert.SerialNumber) {
		t.Errorf("the CRL does not list the revoked certificate")
	}
	if l, _ := s.CAConnectors().RevokedSerials(ctx, "ca1"); len(l) != 1 {
		t.Errorf("revoked serials = %v", l)
	}

	// A certificate whose CA connector is gone cannot be revoked: the
	// token keeps its state.
	res2, err := s.Ops().InitToken(ctx, admin, authsrv.TokenInit{Type: "certificate", Realm: "realm1",
		Params: token.Params{"request": catest.Request(t, key, pkix.Name{CommonName: "bob"}), "ca": "ca1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().DeleteCAConnector(ctx, admin, "ca1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().RevokeTokens(ctx, admin, authsrv.TokenSelect{Serials: []string{res2.Serial}}); !apierr.Is(err, apierr.CA) {
		t.Errorf("revoke without the CA connector = %v", err)
	}
	if tk, err := s.Tokens().Get(ctx, res2.Serial); err != nil || tk.Revoked {
		t.Errorf("the token changed: %+v, %v", tk, err)
	}
	if _, err := s.Ops().DeleteCAConnector(ctx, admin, "ca1"); !apierr.Is(err, apierr.ResourceNotFound) {
		t.Errorf("deleting an unknown connector = %v", err)
	}
}
