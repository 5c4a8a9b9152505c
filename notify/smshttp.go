package notify

import (
	"bytes"
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

	"github.com/authsrv/authsrv/netguard"
)

// HTTP provider limits.
const (
	defaultHTTPTimeout = 3 // seconds, privacyIDEA's
	maxRedirects       = 3
	maxAnswer          = 64 << 10
)

// httpKnown are the HTTP provider's own options; every other option is a
// request parameter.
var httpKnown = map[string]bool{
	"URL": true, "HTTP_METHOD": true, "USERNAME": true, "PASSWORD": true, "RETURN_SUCCESS": true,
	"RETURN_FAIL": true, "PROXY": true, "HTTP_PROXY": true, "HTTPS_PROXY": true, "TIMEOUT": true,
	"CHECK_SSL": true, "SEND_DATA_AS_JSON": true, "REGEXP": true,
}

var errTooManyRedirects = errors.New("too many redirects")

// substituteJSON replaces the tags inside the string leaves of a decoded
// JSON value, so user data can never change the JSON structure.
func substituteJSON(v any, phone, text string) any {
	switch t := v.(type) {
	case string:
		return replaceTags(t, phone, text)
	case []any:
		for i := range t {
			t[i] = substituteJSON(t[i], phone, text)
		}
		return t
	case map[string]any:
		for k := range t {
			t[k] = substituteJSON(t[k], phone, text)
		}
		return t
	}
	return v
}

// sendHTTP is the HTTP provider. It sends one request, follows at most
// three redirects, reads at most 64 KiB of the answer and ends at TIMEOUT.
// Errors name the failing step, never the URL (its query holds the
// message) or the answer.
func (s *Service) sendHTTP(ctx context.Context, gw string, opts map[string]string, headers http.Header, phone, text string) error {
	fail := func(reason string, cause error) error {
		s.log.Warn().Str("smsgateway", gw).Str("result", "failed").AnErr("error", cause).Msg("sms not sent: " + reason)
		return sendErr(fmt.Sprintf("The SMS could not be sent through %s: %s.", gw, reason), cause)
	}
	start := time.Now()
	secs, err := parseTimeout(opts["TIMEOUT"], defaultHTTPTimeout)
	if err != nil {
		return fail("the option TIMEOUT is invalid", nil)
	}
	timeout := time.Duration(secs * float64(time.Second))
	u, err := url.Parse(opts["URL"])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("the option URL is invalid", nil)
	}
	user, pass := opts["USERNAME"], opts["PASSWORD"]
	if u.User != nil {
		if user == "" {
			user = u.User.Username()
			pass, _ = u.User.Password()
		}
		u.User = nil
	}
	method := strings.ToUpper(strings.TrimSpace(opts["HTTP_METHOD"]))
	if method == "" {
		method = http.MethodGet
	}
	asJSON := strings.EqualFold(opts["SEND_DATA_AS_JSON"], "yes")

	form := url.Values{}
	data := map[string]any{}
	for k, v := range opts {
		if httpKnown[k] {
			continue
		}
		form.Set(k, replaceTags(v, phone, text))
		var decoded any
		if asJSON && json.Unmarshal([]byte(v), &decoded) == nil {
			data[k] = substituteJSON(decoded, phone, text)
		} else {
			data[k] = replaceTags(v, phone, text)
		}
	}
	var body io.Reader
	contentType := ""
	switch {
	case method == http.MethodGet:
		q := u.Query()
		for k, vs := range form {
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	case asJSON:
		raw, err := json.Marshal(data)
		if err != nil {
			return fail("the parameters cannot be encoded", nil)
		}
		body, contentType = bytes.NewReader(raw), "application/json"
	default:
		body, contentType = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	}

	proxy := func(r *http.Request) (*url.URL, error) {
		p := opts["HTTP_PROXY"]
		if r.URL.Scheme == "https" {
			p = opts["HTTPS_PROXY"]
		}
		if p == "" {
			p = opts["PROXY"]
		}
		if p == "" {
			return http.ProxyFromEnvironment(r)
		}
		return parseProxy(p)
	}
	dialer := s.netDialer(timeout)
	tr := &http.Transport{
		// Through a proxy the dialer sees only the proxy: the target is
		// checked before the request goes there.
		Proxy: s.dial.Proxy(proxy),
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &dialError{err}
			}
			return c, nil
		},
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12, RootCAs: s.roots,
			InsecureSkipVerify: strings.EqualFold(opts["CHECK_SSL"], "no"), //nolint:gosec // the admin's CHECK_SSL=no
		},
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: maxAnswer,
		DisableKeepAlives:      true,
		ForceAttemptHTTP2:      true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return errTooManyRedirects
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fail("the request cannot be built", nil)
	}
	for k, vs := range headers {
		req.Header[k] = vs
	}
	if contentType != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", contentType)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := client.Do(req)
	if err != nil {
		// url.Error holds the URL, whose query holds the message: keep
		// only the inner error.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var de *dialError
		switch {
		case errors.Is(err, errTooManyRedirects):
			return fail("the gateway redirected too often", err)
		case errors.Is(err, netguard.ErrRefused):
			return fail("the gateway "+unreachable(err), err)
		case errors.As(err, &de):
			return fail("the gateway "+unreachable(de.err), err)
		case ctx.Err() != nil || isTimeout(err):
			return fail("the gateway did not answer in time", err)
		case isTLSFailure(err):
			return fail("the TLS connection to the gateway failed", err)
		default:
			return fail("the request failed", err)
		}
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			return fail("the gateway did not answer in time", err)
		}
		return fail("the answer could not be read", err)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
	default:
		return fail(fmt.Sprintf("the gateway answered with HTTP status %d", resp.StatusCode), nil)
	}
	if ok := opts["RETURN_SUCCESS"]; ok != "" {
		if !bytes.Contains(answer, []byte(ok)) {
			return fail("the answer does not report success", nil)
		}
	} else if bad := opts["RETURN_FAIL"]; bad != "" && bytes.Contains(answer, []byte(bad)) {
		return fail("the answer reports a failure", nil)
	}
	s.log.Debug().Str("smsgateway", gw).Str("result", "sent").
		Int64("duration_ms", time.Since(start).Milliseconds()).Msg("sms sent")
	return nil
}
