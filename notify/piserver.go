package notify

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/store"
)

// piBucket holds one record per remote privacyIDEA server, keyed by its
// identifier.
const piBucket = "privacyideaservers"

// Remote privacyIDEA server limits.
const (
	// piTimeout bounds one request to a remote server (connection, TLS,
	// answer), below the HTTP server's write timeout.
	piTimeout = 30 * time.Second
	// maxPIAnswer caps what is read of a remote answer (a forwarded token
	// list may be long).
	maxPIAnswer = 4 << 20
	maxPIURL    = 255
)

var (
	// ErrPIServerNotFound is returned for an unknown remote privacyIDEA
	// server identifier.
	ErrPIServerNotFound = apierr.New(apierr.ResourceNotFound, "The requested privacyIDEAServer could not be found.")
	// ErrPIFailed is the cause of every request to a remote privacyIDEA
	// server that brought no answer (unreachable, TLS failure, no answer
	// in time, a redirect, an answer too long). The error returned carries
	// a short text of its own and wraps this sentinel.
	ErrPIFailed = apierr.New(apierr.ConfigAdmin, "The privacyIDEA server gave no answer.")
)

// PIServer is the definition of a remote privacyIDEA (or authsrv) server,
// which the Federation event handler forwards requests to.
type PIServer struct {
	// ID is assigned when the definition is created and kept by later
	// changes; it is ignored in writes.
	ID int
	// Identifier names the definition (spaces become "_").
	Identifier string
	// URL is the server's http or https base URL
	// ("https://pi.example.com" or ".../pi"), without credentials, query
	// or fragment; a trailing slash is dropped.
	URL string
	// TLS verifies the server's certificate. The API's default is true;
	// false accepts any certificate (the administrator's choice).
	TLS         bool
	Description string
}

// String describes the definition.
func (d PIServer) String() string {
	return fmt.Sprintf("PIServer(%s %s)", d.Identifier, d.URL)
}

type piRecord struct {
	store.Versioned
	ID          int    `json:"id"`
	Identifier  string `json:"identifier"`
	URL         string `json:"url"`
	TLS         bool   `json:"tls"`
	Description string `json:"description,omitempty"`
	Rev         uint64 `json:"rev"`
}

func (r piRecord) def() PIServer {
	return PIServer{ID: r.ID, Identifier: r.Identifier, URL: r.URL, TLS: r.TLS, Description: r.Description}
}

// piURL checks and normalizes a remote server's base URL.
func piURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", apierr.MissingParameter("url")
	}
	if len(raw) > maxPIURL {
		return "", paramErr("The url is too long (at most %d characters).", maxPIURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || hasControl(raw) {
		return "", paramErr("The url must be an http or https URL.")
	}
	if u.User != nil {
		return "", paramErr("The url must not contain user credentials.")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", paramErr("The url must not contain a query or a fragment.")
	}
	if !validHost(u.Hostname()) {
		return "", paramErr("The url must name a host name or an IP address.")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func normalizePI(d *PIServer) error {
	d.Identifier = strings.ReplaceAll(strings.TrimSpace(d.Identifier), " ", "_")
	if err := validIdentifier("privacyIDEA server", d.Identifier); err != nil {
		return err
	}
	u, err := piURL(d.URL)
	if err != nil {
		return err
	}
	d.URL = u
	if hasControl(d.Description) {
		return paramErr("The description contains invalid characters.")
	}
	return nil
}

// SetPIServer creates or replaces the remote privacyIDEA server
// def.Identifier (spaces in it become "_"); a replaced definition keeps
// its ID. Each of also runs in the same transaction after the write.
func (s *Service) SetPIServer(ctx context.Context, def PIServer, also ...func(store.Tx) error) error {
	if err := normalizePI(&def); err != nil {
		return err
	}
	id := def.Identifier
	err := s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(piBucket)
		var old piRecord
		err := store.GetJSON(b, []byte(id), &old)
		switch {
		case errors.Is(err, store.ErrNotFound):
			n, err := b.NextSequence()
			if err != nil {
				return err
			}
			old.ID = int(n)
		case err != nil:
			return err
		}
		rev, err := store.BumpConfigRevision(tx)
		if err != nil {
			return err
		}
		rec := piRecord{ID: old.ID, Identifier: id, URL: def.URL, TLS: def.TLS, Description: def.Description, Rev: rev}
		rec.Schema = schema
		if err := store.PutJSON(b, []byte(id), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return fmt.Errorf("privacyidea server %s: %w", id, err)
	}
	return nil
}

// PIServers returns every remote privacyIDEA server definition, ordered by
// identifier.
func (s *Service) PIServers(ctx context.Context) ([]PIServer, error) {
	return listDefs(ctx, s.st, piBucket, piRecord.def, func(d PIServer) string { return d.Identifier })
}

// PIServer returns the remote privacyIDEA server id, or
// [ErrPIServerNotFound].
func (s *Service) PIServer(ctx context.Context, id string) (PIServer, error) {
	var rec piRecord
	err := s.st.View(ctx, func(tx store.Tx) error {
		err := store.GetJSON(tx.Bucket(piBucket), []byte(id), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return ErrPIServerNotFound
		}
		return err
	})
	if err != nil {
		return PIServer{}, err
	}
	return rec.def(), nil
}

// DeletePIServer removes the remote privacyIDEA server id; also runs in
// the change's transaction.
func (s *Service) DeletePIServer(ctx context.Context, id string, also ...func(store.Tx) error) error {
	return deleteDef(ctx, s.st, piBucket, id, ErrPIServerNotFound, also)
}

// PIRequest is one request to a remote privacyIDEA server.
type PIRequest struct {
	// Method is GET (Params go in the query), POST or DELETE (Params go
	// in a form body).
	Method string
	// Path is the request's path below the server's URL
	// ("/validate/check").
	Path   string
	Params url.Values
	// Header holds extra request headers (the Federation handler's
	// Authorization). Host, Content-Type and Content-Length are set here.
	Header http.Header
}

// String describes the request without its parameters and headers (they
// may hold a password or a token).
func (r PIRequest) String() string { return "PIRequest(" + r.Method + " " + r.Path + ")" }

// PIAnswer is a remote privacyIDEA server's answer, whatever its HTTP
// status.
type PIAnswer struct {
	// URL is the request's URL without its query (the server's URL and
	// the path).
	URL string
	// Status is the HTTP status code.
	Status int
	// Body is the answer (at most 4 MiB).
	Body []byte
}

// PIForward sends req to the remote privacyIDEA server id and returns its
// answer. An answer with any HTTP status is a result; no answer is an
// error that wraps [ErrPIFailed] and never shows the parameters or the
// remote text.
func (s *Service) PIForward(ctx context.Context, id string, req PIRequest) (PIAnswer, error) {
	def, err := s.PIServer(ctx, id)
	if err != nil {
		return PIAnswer{}, err
	}
	return s.piDo(ctx, def, req)
}

// TestPIServer sends a /validate/check for user and password to the URL
// of the inline definition def (which need not be stored) and reports
// whether the remote server accepted it (result.status and result.value
// true). An answer with an HTTP status other than 200 is false; no
// answer, or a 200 answer that is not a privacyIDEA response, is an
// error.
func (s *Service) TestPIServer(ctx context.Context, def PIServer, user, password string) (bool, error) {
	u, err := piURL(def.URL)
	if err != nil {
		return false, err
	}
	def.URL = u
	if strings.TrimSpace(def.Identifier) == "" {
		def.Identifier = "test"
	}
	ans, err := s.piDo(ctx, def, PIRequest{Method: http.MethodPost, Path: "/validate/check",
		Params: url.Values{"user": {user}, "pass": {password}}})
	if err != nil {
		return false, err
	}
	if ans.Status != http.StatusOK {
		return false, nil
	}
	var env struct {
		Result *struct {
			Status bool `json:"status"`
			Value  any  `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(ans.Body, &env); err != nil || env.Result == nil {
		return false, apierr.New(apierr.ConfigAdmin,
			fmt.Sprintf("The privacyIDEA server %s did not answer with a privacyIDEA response.", def.Identifier)).Wrap(ErrPIFailed)
	}
	return env.Result.Status && env.Result.Value == true, nil
}

// errPIRedirect stops a redirect: the request (a password, a token) goes
// only to the URL the administrator named.
var errPIRedirect = errors.New("redirect refused")

// piDo sends one request to def's server through the dial policy, with
// def's certificate check, no redirects and piTimeout.
func (s *Service) piDo(ctx context.Context, def PIServer, req PIRequest) (PIAnswer, error) {
	fail := func(reason string, cause error) error {
		s.log.Warn().Str("privacyideaserver", def.Identifier).Str("method", req.Method).Str("path", req.Path).
			Str("result", "failed").AnErr("error", cause).Msg("privacyidea request failed: " + reason)
		err := apierr.New(apierr.ConfigAdmin, fmt.Sprintf("The privacyIDEA server %s failed: %s.", def.Identifier, reason))
		if cause == nil {
			return err.Wrap(ErrPIFailed)
		}
		return err.Wrap(errors.Join(ErrPIFailed, cause))
	}
	method := strings.ToUpper(req.Method)
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		return PIAnswer{}, paramErr("The method %s cannot be sent to a privacyIDEA server.", req.Method)
	}
	if !strings.HasPrefix(req.Path, "/") || hasControl(req.Path) {
		return PIAnswer{}, paramErr("The path of a privacyIDEA server request must begin with a slash.")
	}
	u, err := url.Parse(def.URL)
	if err != nil {
		return PIAnswer{}, paramErr("The url must be an http or https URL.")
	}
	u.Path = strings.TrimRight(u.Path, "/") + req.Path
	u.RawPath = ""
	origin := u.String()
	var body io.Reader
	if method == http.MethodGet {
		u.RawQuery = req.Params.Encode()
	} else {
		body = strings.NewReader(req.Params.Encode())
	}

	dialer := s.netDialer(piTimeout)
	tr := &http.Transport{
		// Through a proxy the dialer sees only the proxy: the target is
		// checked before the request goes there.
		Proxy: s.dial.Proxy(http.ProxyFromEnvironment),
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &dialError{err}
			}
			return c, nil
		},
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12, RootCAs: s.roots,
			InsecureSkipVerify: !def.TLS, //nolint:gosec // the administrator's tls=false
		},
		TLSHandshakeTimeout:    piTimeout,
		ResponseHeaderTimeout:  piTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		DisableKeepAlives:      true,
		ForceAttemptHTTP2:      true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		Timeout:       piTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errPIRedirect },
	}
	ctx, cancel := context.WithTimeout(ctx, piTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return PIAnswer{}, fail("the request cannot be built", nil)
	}
	for k, vs := range req.Header {
		hr.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	hr.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := client.Do(hr)
	if err != nil {
		// url.Error repeats the URL, whose query may hold a password:
		// keep only the inner error.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var de *dialError
		switch {
		case errors.Is(err, errPIRedirect):
			return PIAnswer{}, fail("it answered with a redirect", nil)
		case errors.Is(err, netguard.ErrRefused):
			return PIAnswer{}, fail("it "+unreachable(err), err)
		case errors.As(err, &de):
			return PIAnswer{}, fail("it "+unreachable(de.err), err)
		case ctx.Err() != nil || isTimeout(err):
			return PIAnswer{}, fail("it did not answer in time", err)
		case isTLSFailure(err):
			return PIAnswer{}, fail("the TLS connection failed", err)
		default:
			return PIAnswer{}, fail("the request failed", err)
		}
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxPIAnswer+1))
	if err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			return PIAnswer{}, fail("it did not answer in time", err)
		}
		return PIAnswer{}, fail("the answer could not be read", err)
	}
	if len(answer) > maxPIAnswer {
		return PIAnswer{}, fail("the answer is too long", nil)
	}
	s.log.Debug().Str("privacyideaserver", def.Identifier).Str("method", method).Str("path", req.Path).
		Int("status", resp.StatusCode).Int64("duration_ms", time.Since(start).Milliseconds()).Msg("privacyidea request answered")
	return PIAnswer{URL: origin, Status: resp.StatusCode, Body: answer}, nil
}
