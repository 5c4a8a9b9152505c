package testsvc

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// slapdDirs are where Debian installs slapd (it is not in a normal user's
// PATH).
var slapdDirs = []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/libexec", "/usr/libexec"}

// slapdSchemaDir and slapdModuleDir are Debian's locations of the schema
// files and the back_mdb module.
const (
	slapdSchemaDir = "/etc/ldap/schema"
	slapdModuleDir = "/usr/lib/ldap"
)

// SlapdOption configures Slapd.
type SlapdOption func(*slapdOptions)

type slapdOptions struct {
	tls bool
}

// SlapdTLS makes Slapd generate a self-signed CA and a server certificate
// for 127.0.0.1 and localhost, serve ldaps:// on a second port and accept
// StartTLS on the plain port.
func SlapdTLS() SlapdOption { return func(o *slapdOptions) { o.tls = true } }

// SlapdServer is a running (or stopped) OpenLDAP slapd owned by one test.
// Its database has the base entry BaseDN and nothing else until the test
// adds entries with AddLDIF.
type SlapdServer struct {
	// URL is ldap://127.0.0.1:<Port>.
	URL string
	// LDAPSURL is ldaps://127.0.0.1:<TLSPort>; empty without SlapdTLS.
	LDAPSURL string
	// Port and TLSPort are the listening ports (TLSPort 0 without TLS).
	Port, TLSPort int
	// BaseDN is the database suffix, dc=example,dc=org.
	BaseDN string
	// BindDN and BindPW are the rootdn and its password.
	BindDN, BindPW string
	// CAFile and CAPEM are the CA certificate that signed the server
	// certificate (empty without SlapdTLS).
	CAFile, CAPEM string
	// Dir is the temporary directory with the configuration, the database
	// and slapd.log.
	Dir string

	bin   string
	conf  string
	hosts string

	proc
}

// Slapd starts Debian's slapd on 127.0.0.1 on free ports, with its own
// configuration (core, cosine, inetorgperson and nis schemas, back_mdb) and
// database in tb.TempDir(), and stops it when the test ends. It skips the
// test when slapd is missing (fails under CI, see Require).
func Slapd(tb testing.TB, opts ...SlapdOption) *SlapdServer {
	tb.Helper()
	bin := Require(tb, "slapd", slapdDirs...)
	for _, p := range []string{slapdSchemaDir + "/core.schema", slapdModuleDir + "/back_mdb.la"} {
		if _, err := os.Stat(p); err != nil {
			msg := "slapd is installed but " + p + " is missing (install Debian's slapd package)"
			if os.Getenv("CI") != "" {
				tb.Fatal(msg)
			}
			tb.Skip(msg)
		}
	}
	var o slapdOptions
	for _, opt := range opts {
		opt(&o)
	}
	dir := tb.TempDir()
	s := &SlapdServer{
		proc:   proc{name: "slapd"},
		Port:   FreePort(tb),
		BaseDN: "dc=example,dc=org",
		BindDN: "cn=admin,dc=example,dc=org",
		BindPW: slapdSecret(tb),
		Dir:    dir,
		bin:    bin,
		conf:   filepath.Join(dir, "slapd.conf"),
	}
	s.URL = "ldap://127.0.0.1:" + strconv.Itoa(s.Port)
	s.hosts = s.URL + "/"
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o700); err != nil {
		tb.Fatal(err)
	}
	var conf strings.Builder
	for _, schema := range []string{"core", "cosine", "inetorgperson", "nis"} {
		fmt.Fprintf(&conf, "include %s/%s.schema\n", slapdSchemaDir, schema)
	}
	fmt.Fprintf(&conf, "modulepath %s\nmoduleload back_mdb\n", slapdModuleDir)
	fmt.Fprintf(&conf, "pidfile %s\nargsfile %s\n", filepath.Join(dir, "slapd.pid"), filepath.Join(dir, "slapd.args"))
	if o.tls {
		s.TLSPort = FreePort(tb)
		s.LDAPSURL = "ldaps://127.0.0.1:" + strconv.Itoa(s.TLSPort)
		s.hosts += " " + s.LDAPSURL + "/"
		caPEM, certPEM, keyPEM := selfSignedChain(tb)
		s.CAPEM = string(caPEM)
		s.CAFile = filepath.Join(dir, "ca.pem")
		certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
		for name, data := range map[string][]byte{s.CAFile: caPEM, certFile: certPEM, keyFile: keyPEM} {
			if err := os.WriteFile(name, data, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
		fmt.Fprintf(&conf, "TLSCACertificateFile %s\nTLSCertificateFile %s\nTLSCertificateKeyFile %s\n", s.CAFile, certFile, keyFile)
	}
	fmt.Fprintf(&conf, "database mdb\nmaxsize 67108864\nsuffix %q\nrootdn %q\nrootpw %s\ndirectory %s\n",
		s.BaseDN, s.BindDN, s.BindPW, filepath.Join(dir, "db"))
	conf.WriteString("index objectClass eq\n")
	// Users may bind with their password and change it; everything else
	// is readable, the password only by the rootdn.
	conf.WriteString("access to attrs=userPassword by self write by anonymous auth by * none\n")
	conf.WriteString("access to * by * read\n")
	if err := os.WriteFile(s.conf, []byte(conf.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.stop() })
	s.Start(tb)
	s.AddLDIF(tb, "dn: "+s.BaseDN+"\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n")
	return s
}

// Start starts slapd again on the same ports after Stop. It is a no-op
// when slapd is running.
func (s *SlapdServer) Start(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "slapd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	// -d keeps slapd in the foreground, so the pid we start is slapd's
	// and we can stop exactly that process.
	cmd := exec.Command(s.bin, "-f", s.conf, "-h", s.hosts, "-d", "0")
	s.launch(tb, cmd, logf)
	done := s.done

	ports := []int{s.Port}
	if s.TLSPort != 0 {
		ports = append(ports, s.TLSPort)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, port := range ports {
		addr := "127.0.0.1:" + strconv.Itoa(port)
		for {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				_ = c.Close()
				break
			}
			select {
			case <-done:
				s.cmd, s.done = nil, nil
				tb.Fatalf("slapd exited at start: %s", s.logTail())
			default:
			}
			if time.Now().After(deadline) {
				tb.Fatalf("slapd does not listen on %s: %v; log: %s", addr, err, s.logTail())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Stop stops slapd (the process Start started, by its pid) and waits until
// it has exited, so that the ports refuse connections. The database stays
// and Start serves it again.
func (s *SlapdServer) Stop(tb testing.TB) {
	tb.Helper()
	if err := s.stop(); err != nil {
		tb.Fatal(err)
	}
}

func (s *SlapdServer) logTail() string { return fileTail(filepath.Join(s.Dir, "slapd.log")) }

// Conn returns a connection bound as the rootdn; the test closes it (it is
// also closed when the test ends).
func (s *SlapdServer) Conn(tb testing.TB) *ldap.Conn {
	tb.Helper()
	c, err := ldap.DialURL(s.URL, ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}))
	if err != nil {
		tb.Fatalf("dial slapd: %v", err)
	}
	c.SetTimeout(10 * time.Second)
	tb.Cleanup(func() { _ = c.Close() })
	if err := c.Bind(s.BindDN, s.BindPW); err != nil {
		tb.Fatalf("bind as rootdn: %v", err)
	}
	return c
}

// AddLDIF adds the entries of an LDIF text (records separated by blank
// lines; "attr: value", "attr:: base64", folded lines and # comments;
// only additions) as the rootdn. Non-ASCII values may be written as plain
// UTF-8.
func (s *SlapdServer) AddLDIF(tb testing.TB, ldif string) {
	tb.Helper()
	reqs, err := ParseLDIF(ldif)
	if err != nil {
		tb.Fatal(err)
	}
	c := s.Conn(tb)
	defer func() { _ = c.Close() }()
	for _, r := range reqs {
		if err := c.Add(r); err != nil {
			tb.Fatalf("add %s: %v", r.DN, err)
		}
	}
}

// ParseLDIF parses the LDIF subset AddLDIF accepts into add requests.
func ParseLDIF(text string) ([]*ldap.AddRequest, error) {
	// Unfold continuation lines first.
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, " ") && len(lines) > 0 && lines[len(lines)-1] != "" {
			lines[len(lines)-1] += line[1:]
			continue
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var (
		out   []*ldap.AddRequest
		cur   *ldap.AddRequest
		attrs map[string]int
	)
	for n, line := range append(lines, "") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if cur != nil {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("ldif line %d: no colon: %q", n+1, line)
		}
		if strings.HasPrefix(value, ":") {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value[1:]))
			if err != nil {
				return nil, fmt.Errorf("ldif line %d: %w", n+1, err)
			}
			value = string(b)
		} else {
			value = strings.TrimLeft(value, " ")
		}
		switch {
		case cur == nil && strings.EqualFold(name, "dn"):
			cur = ldap.NewAddRequest(value, nil)
			attrs = map[string]int{}
		case cur == nil:
			return nil, fmt.Errorf("ldif line %d: record does not start with dn", n+1)
		case strings.EqualFold(name, "changetype"):
			if !strings.EqualFold(value, "add") {
				return nil, fmt.Errorf("ldif line %d: only changetype add is supported", n+1)
			}
		default:
			key := strings.ToLower(name)
			if i, seen := attrs[key]; seen {
				cur.Attributes[i].Vals = append(cur.Attributes[i].Vals, value)
			} else {
				attrs[key] = len(cur.Attributes)
				cur.Attribute(name, []string{value})
			}
		}
	}
	return out, nil
}

// SSHA returns the {SSHA} (salted SHA-1) userPassword value of password,
// which slapd verifies on bind.
func SSHA(password string) string {
	salt := make([]byte, 8)
	_, _ = rand.Read(salt)
	return sshaWithSalt(password, salt)
}

func slapdSecret(tb testing.TB) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// selfSignedChain returns a CA certificate and a server certificate with
// its key for 127.0.0.1 and localhost, all PEM encoded.
func selfSignedChain(tb testing.TB) (caPEM, certPEM, keyPEM []byte) {
	tb.Helper()
	must := func(err error) {
		if err != nil {
			tb.Helper()
			tb.Fatal(err)
		}
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "authsrv test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(48 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	ca, err := x509.ParseCertificate(caDER)
	must(err)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	must(err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	must(err)
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return caPEM, certPEM, keyPEM
}

// TLSConfig returns a client configuration that trusts the server's CA
// (nil without SlapdTLS).
func (s *SlapdServer) TLSConfig() *tls.Config {
	if s.CAPEM == "" {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.CAPEM))
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

func sshaWithSalt(password string, salt []byte) string {
	h := sha1.Sum(append([]byte(password), salt...))
	return "{SSHA}" + base64.StdEncoding.EncodeToString(append(h[:], salt...))
}
