package notify_test

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/notify"
)

// TestSMIMEFilesConfined is catalogue B7 for the S/MIME key and
// certificate paths: with Config.Files set, the data directory's enckey, a
// symbolic link pointing outside the roots, /etc/shadow and a ..
// traversal are refused when the definition is saved and when a test mail
// is asked for, with a text that names the rule; a key pair beneath a
// root signs; a key swapped for a link to the enckey after the save is
// never read (strict: not sent; lenient: sent unsigned).
func TestSMIMEFilesConfined(t *testing.T) {
	cert := newCert(t)
	base := t.TempDir()
	root, data := filepath.Join(base, "root"), filepath.Join(base, "data")
	for _, d := range []string{root, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: cert.keyDER})
	certFile, keyFile := filepath.Join(root, "cert.pem"), filepath.Join(root, "key.pem")
	enckey, outside := filepath.Join(data, "enckey"), filepath.Join(base, "outside.pem")
	for f, b := range map[string][]byte{certFile: cert.certPEM, keyFile: keyPEM, enckey: keyPEM, outside: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link.pem")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *notify.Config) {
		c.Files = fileroot.Confinement{Roots: []string{root}, DataDir: data}
	})
	k := newSink(t, nil, false, false, nil)
	def := func(id, key, crt string) notify.SMTPServer {
		d := smtpDef(k, id)
		d.SMIME, d.PrivateKey, d.Certificate, d.DontSendOnError = true, key, crt, true
		return d
	}
	dotdot := root + "/../outside.pem"
	cases := []struct {
		name, key, crt, rule string
	}{
		{"key is the enckey", enckey, certFile, enckey + " is in the server's data directory"},
		{"certificate is the enckey", keyFile, enckey, enckey + " is in the server's data directory"},
		{"key is a symlink pointing outside", link, certFile, link + " is outside the allowed directories"},
		{"key is etc shadow", "/etc/shadow", certFile, "/etc/shadow is outside the allowed directories"},
		{"certificate through ..", keyFile, dotdot, dotdot + " is outside the allowed directories"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := def("refused", tc.key, tc.crt)
			for what, err := range map[string]error{
				"SetSMTP":      e.s.SetSMTP(t.Context(), d),
				"SendTestMail": e.s.SendTestMail(t.Context(), d, "bob@example.com"),
			} {
				wantCode(t, err, apierr.Parameter)
				if _, _, msg, _, _ := apierr.Wire(err); !strings.Contains(msg, tc.rule) || !strings.Contains(msg, "S/MIME") {
					t.Errorf("%s: %q; want the rule %q", what, msg, tc.rule)
				}
			}
		})
	}
	if list, err := e.s.SMTPServers(t.Context()); err != nil || len(list) != 0 {
		t.Fatalf("refused definitions were stored: %v, %v", list, err)
	}
	if n := len(k.messages()); n != 0 {
		t.Fatalf("%d mails went out for refused definitions", n)
	}

	// Beneath the root the pair signs.
	if err := e.s.SetSMTP(t.Context(), def("signed", keyFile, certFile)); err != nil {
		t.Fatal(err)
	}
	mailTo := notify.Mail{To: []string{"alice@example.com"}, Subject: "s", Body: "b"}
	if err := e.s.SendMail(t.Context(), "signed", mailTo); err != nil {
		t.Fatal(err)
	}

	// The key swapped for a link to the enckey after the save: a strict
	// definition sends nothing, a lenient one sends unsigned, and the log
	// names the rule.
	lenient := def("lenient", keyFile, certFile)
	lenient.DontSendOnError = false
	if err := e.s.SetSMTP(t.Context(), lenient); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(enckey, keyFile); err != nil {
		t.Fatal(err)
	}
	wantSendFailed(t, e.s.SendMail(t.Context(), "signed", mailTo))
	if err := e.s.SendMail(t.Context(), "lenient", mailTo); err != nil {
		t.Fatal(err)
	}
	msgs := k.messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2 (signed, then lenient unsigned)", len(msgs))
	}
	if ct := parseMsg(t, msgs[0].Data).Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/signed") {
		t.Errorf("first mail Content-Type %q, want signed", ct)
	}
	if ct := parseMsg(t, msgs[1].Data).Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("lenient mail Content-Type %q, want unsigned", ct)
	}
	if log := e.log.String(); !strings.Contains(log, "data directory") {
		t.Errorf("the log does not name the rule:\n%s", log)
	}
}
