package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode"

	"golang.org/x/crypto/ssh"
)

// SSHKeysPasswordEnv is the environment variable the ssh-keys command reads
// the administrator's password from when no -password-file is given. The
// password is never a flag: a flag's value is visible to every local user
// in the process list.
const SSHKeysPasswordEnv = "AUTHSRV_SSH_KEYS_PASSWORD"

// sshKeysUsage is the ssh-keys command's help.
const sshKeysUsage = `usage: authsrv ssh-keys [flags] UNIXUSER

Prints the SSH public keys the server gives for UNIXUSER on this host
(GET /machine/authitem/ssh), one authorized_keys line each, for OpenSSH's
AuthorizedKeysCommand. No keys: no output and exit status 0. Errors: a
short message on standard error and a non-zero exit status (sshd then lets
no key in). The administrator's password comes from -password-file or the
environment variable ` + SSHKeysPasswordEnv + `, never from a flag.

sshd_config:
  AuthorizedKeysCommand /usr/local/bin/authsrv ssh-keys -url https://auth.example.org -ca-file /etc/authsrv/ca.pem -service-id webserver -admin sshkeys -password-file /etc/authsrv/ssh-keys.pw %u
  AuthorizedKeysCommandUser authsrv-keys

flags:
`

// maxSSHKeysBody bounds a response the command reads.
const maxSSHKeysBody = 4 << 20

// maxPasswordFile bounds the password file.
const maxPasswordFile = 4 << 10

// sshKeysConfig is the ssh-keys command's settings.
type sshKeysConfig struct {
	base      *url.URL
	serviceID string
	admin     string
	password  string
	hostname  string
	user      string
	client    *http.Client
}

// sshKeys is "ssh-keys UNIXUSER": it logs in as an administrator, asks the
// server for the ssh auth items of this host (or service ID) and UNIXUSER,
// and prints each key as an authorized_keys line.
func (e *env) sshKeys(args []string) error {
	fs := flag.NewFlagSet("authsrv ssh-keys", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), sshKeysUsage)
		fs.PrintDefaults()
	}
	rawURL := fs.String("url", "http://127.0.0.1:8080", "the authsrv server's address (http:// only to a loopback address)")
	serviceID := fs.String("service-id", "", "the service ID whose keys to print (default: the keys attached to this host)")
	admin := fs.String("admin", "", "the administrator to log in as (required; give it only the right to read auth items)")
	pwFile := fs.String("password-file", "", "file holding the administrator's password (first line; not readable by others); default: $"+SSHKeysPasswordEnv)
	caFile := fs.String("ca-file", "", "PEM file of the CA certificates to trust for https:// (default: the system's)")
	hostname := fs.String("hostname", "", "this host's name as the server knows it (default: the operating system's host name)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long the whole lookup may take")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	c := sshKeysConfig{serviceID: *serviceID, admin: *admin, hostname: *hostname, user: fs.Arg(0)}
	if err := validName("the unix user", c.user); err != nil {
		return err
	}
	if c.admin == "" {
		return errors.New("-admin is required")
	}
	if *timeout <= 0 {
		return fmt.Errorf("-timeout %s: want more than 0", *timeout)
	}
	base, err := sshKeysURL(*rawURL)
	if err != nil {
		return err
	}
	c.base = base
	if c.hostname == "" {
		if c.hostname, err = os.Hostname(); err != nil {
			return fmt.Errorf("the host name: %w (give -hostname)", err)
		}
	}
	if err := validName("-hostname", c.hostname); err != nil {
		return err
	}
	if c.password, err = e.sshKeysPassword(*pwFile); err != nil {
		return err
	}
	if c.client, err = sshKeysClient(*caFile, *timeout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, *timeout)
	defer cancel()
	lines, err := c.keys(ctx, e.stderr)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	for _, l := range lines {
		out.WriteString(l)
		out.WriteByte('\n')
	}
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// validName refuses an empty value and one with control characters (they
// could not come from sshd's %u and would only confuse the query).
func validName(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(v) > 256 || strings.ContainsFunc(v, unicode.IsControl) {
		return fmt.Errorf("%s %q: too long or with control characters", what, v)
	}
	return nil
}

// sshKeysURL checks -url: http or https, no user information (the password
// belongs in -password-file), and plain http only to a loopback address,
// since the administrator's password and JWT travel with every call.
func sshKeysURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("-url %s: want http:// or https:// and a host", u.Redacted())
	}
	if u.User != nil {
		return nil, errors.New("-url: no user or password in the address (use -admin and -password-file)")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("-url %s: no query or fragment", u.Redacted())
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("-url %s: plain http only to a loopback address (the password would cross the network in clear); use https://", u)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sshKeysPassword reads the password: the first line of file, which must
// not be accessible to other users, or else the environment variable.
func (e *env) sshKeysPassword(file string) (string, error) {
	if file == "" {
		pw := e.getenv(SSHKeysPasswordEnv)
		if pw == "" {
			return "", errors.New("no password: give -password-file or set " + SSHKeysPasswordEnv)
		}
		return pw, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("-password-file: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("-password-file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("-password-file %s: not a regular file", file)
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return "", fmt.Errorf("-password-file %s: accessible to every user (mode %04o); chmod o-rwx it", file, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return "", fmt.Errorf("-password-file: %w", err)
	}
	if len(b) > maxPasswordFile {
		return "", fmt.Errorf("-password-file %s: longer than %d bytes", file, maxPasswordFile)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("-password-file %s: the first line is empty", file)
	}
	return line, nil
}

// sshKeysClient is the HTTP client: a whole-call timeout, TLS 1.2 or
// newer with the -ca-file roots, no proxy from the environment (sshd's
// command runs with a minimal one anyway) and no redirects (the password
// and the JWT go to -url and nowhere else).
func sshKeysClient(caFile string, timeout time.Duration) (*http.Client, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca-file %s: no PEM certificate in it", caFile)
		}
		tlsConf.RootCAs = pool
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          1,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the server redirected; give its final address in -url")
		},
	}, nil
}

// sshKeysEnvelope is the part of the server's answer the command reads.
type sshKeysEnvelope struct {
	Result struct {
		Status bool            `json:"status"`
		Value  json.RawMessage `json:"value"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"result"`
}

// sshAuthItem is one item of GET /machine/authitem/ssh.
type sshAuthItem struct {
	SSHKey    string `json:"sshkey"`
	Username  string `json:"username"`
	User      string `json:"user"`
	ServiceID string `json:"service_id"`
}

// keys logs in and returns the authorized_keys lines for c.user; items it
// skips are named on warn.
func (c *sshKeysConfig) keys(ctx context.Context, warn io.Writer) ([]string, error) {
	form := url.Values{"username": {c.admin}, "password": {c.password}}
	var auth struct {
		Token string `json:"token"`
	}
	if err := c.call(ctx, http.MethodPost, "/auth", "", form, &auth); err != nil {
		return nil, fmt.Errorf("login as %s: %w", c.admin, err)
	}
	if auth.Token == "" {
		return nil, fmt.Errorf("login as %s: the server sent no token", c.admin)
	}
	q := url.Values{"hostname": {c.hostname}, "user": {c.user}}
	if c.serviceID != "" {
		q.Set("service_id", c.serviceID)
	}
	// Nothing attached: the value is {} (no "ssh" key).
	var items struct {
		SSH []sshAuthItem `json:"ssh"`
	}
	if err := c.call(ctx, http.MethodGet, "/machine/authitem/ssh?"+q.Encode(), auth.Token, nil, &items); err != nil {
		return nil, fmt.Errorf("ssh keys of %s: %w", c.user, err)
	}
	var lines []string
	seen := map[string]bool{}
	for i, it := range items.SSH {
		line, err := authorizedKeyLine(it, c.user)
		if err != nil {
			// One bad item does not hide the others; sshd logs stderr.
			fmt.Fprintf(warn, "authsrv ssh-keys: item %d skipped: %v\n", i, err)
			continue
		}
		if !seen[line] {
			seen[line] = true
			lines = append(lines, line)
		}
	}
	return lines, nil
}

// authorizedKeyLine checks one item and returns its key line. The server
// filters by the unix user already; an item for another user is refused
// here as well, and so is a line with options (command=, from=, ...) or
// anything after the key: the command prints keys, never sshd options.
func authorizedKeyLine(it sshAuthItem, user string) (string, error) {
	if it.User != user {
		return "", fmt.Errorf("it is for the unix user %q, not %q", it.User, user)
	}
	line := strings.TrimSpace(it.SSHKey)
	if line == "" || strings.ContainsAny(line, "\r\n\x00") {
		return "", errors.New("no key, or a key of several lines")
	}
	// ParseAuthorizedKey also refuses a type name that is not the key's.
	_, _, opts, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return "", fmt.Errorf("not an SSH public key: %w", err)
	}
	if len(opts) > 0 || len(bytes.TrimSpace(rest)) > 0 {
		return "", errors.New("the key line has options or trailing data")
	}
	return line, nil
}

// call sends one request and decodes the envelope's value into v. Errors
// name the server's message, never the password or the JWT.
func (c *sshKeysConfig) call(ctx context.Context, method, path, jwt string, form url.Values, v any) error {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if jwt != "" {
		req.Header.Set("Authorization", jwt)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "authsrv-ssh-keys")
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: no answer in time", c.base.Redacted())
		}
		return fmt.Errorf("%s: %w", c.base.Redacted(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSSHKeysBody+1))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if len(b) > maxSSHKeysBody {
		return fmt.Errorf("the answer is larger than %d bytes", maxSSHKeysBody)
	}
	var env sshKeysEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("HTTP %d: not a JSON answer", resp.StatusCode)
	}
	if env.Result.Error != nil || !env.Result.Status || resp.StatusCode != http.StatusOK {
		msg := "no error message"
		if env.Result.Error != nil && env.Result.Error.Message != "" {
			msg = env.Result.Error.Message
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.Map(printable, msg))
	}
	if err := json.Unmarshal(env.Result.Value, v); err != nil {
		return fmt.Errorf("unexpected value: %w", err)
	}
	return nil
}

// printable drops control characters from a server message before it
// reaches sshd's log.
func printable(r rune) rune {
	if unicode.IsControl(r) {
		return -1
	}
	return r
}
