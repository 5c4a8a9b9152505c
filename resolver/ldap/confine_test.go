package ldap_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/resolver"
	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
)

// caPEM returns a self-signed CA certificate in PEM.
func caPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestCAFileConfined is catalogue B7 for TLS_CA_FILE: under TypeConfined
// the data directory's enckey, a symbolic link pointing outside the
// roots, /etc/shadow and a .. traversal are refused when the
// configuration is saved and when a store is built, with a text that
// names the rule; a CA file beneath a root works.
func TestCAFileConfined(t *testing.T) {
	base := t.TempDir()
	root, data := filepath.Join(base, "root"), filepath.Join(base, "data")
	for _, d := range []string{root, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ca := caPEM(t)
	good := filepath.Join(root, "ca.pem")
	enckey := filepath.Join(data, "enckey")
	outside := filepath.Join(base, "outside.pem")
	for _, f := range []string{good, enckey, outside} {
		if err := os.WriteFile(f, ca, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link.pem")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	keyLink := filepath.Join(root, "key.pem")
	if err := os.Symlink(enckey, keyLink); err != nil {
		t.Fatal(err)
	}
	typ := ldapresolver.TypeConfined(fileroot.Confinement{Roots: []string{root}, DataDir: data})
	cfg := func(file string) resolver.Config {
		return resolver.Config{"LDAPURI": "ldaps://127.0.0.1:1", "LDAPBASE": "dc=example,dc=org", "LOGINNAMEATTRIBUTE": "uid", "TLS_CA_FILE": file}
	}
	dotdot := root + "/../outside.pem"
	cases := []struct {
		name, file, rule string // rule "" = accepted
	}{
		{"a CA file beneath a root", good, ""},
		{"the data directory's enckey", enckey, enckey + " is in the server's data directory"},
		{"a link to the enckey", keyLink, keyLink + " is in the server's data directory"},
		{"a symlink pointing outside", link, link + " is outside the allowed directories"},
		{"etc shadow", "/etc/shadow", "/etc/shadow is outside the allowed directories"},
		{".. traversal", dotdot, dotdot + " is outside the allowed directories"},
		{"proc", "/proc/self/environ", "/proc, /sys and /dev"},
		{"relative", "ca.pem", "must be an absolute path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := typ.Validate(cfg(tc.file))
			r, nerr := typ.New(t.Context(), cfg(tc.file), resolver.Env{})
			if r != nil {
				defer r.Close()
			}
			if tc.rule == "" {
				if err != nil || nerr != nil {
					t.Fatalf("Validate: %v, New: %v", err, nerr)
				}
				return
			}
			for what, e := range map[string]error{"Validate": err, "New": nerr} {
				if !errors.Is(e, resolver.ErrConfig) || !strings.Contains(e.Error(), tc.rule) || !strings.Contains(e.Error(), "TLS_CA_FILE") {
					t.Errorf("%s: %v; want ErrConfig naming %q", what, e, tc.rule)
				}
			}
		})
	}

	// Without confinement (Type) the same file outside any root is
	// read, /proc still is not.
	if r, err := ldapresolver.Type().New(t.Context(), cfg(outside), resolver.Env{}); err != nil {
		t.Errorf("Type().New(outside): %v", err)
	} else {
		r.Close()
	}
	if err := ldapresolver.Type().Validate(cfg("/proc/self/environ")); !errors.Is(err, resolver.ErrConfig) {
		t.Errorf("Type().Validate(/proc/self/environ): %v", err)
	}

	// A file allowed at save time and swapped for a link to the enckey
	// is refused when the store is built again.
	swap := filepath.Join(root, "swap.pem")
	if err := os.WriteFile(swap, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := typ.Validate(cfg(swap)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(swap); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(enckey, swap); err != nil {
		t.Fatal(err)
	}
	if _, err := typ.New(t.Context(), cfg(swap), resolver.Env{}); err == nil || !strings.Contains(err.Error(), "data directory") {
		t.Errorf("New after the swap: %v", err)
	}
}
