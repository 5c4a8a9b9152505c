package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// userAgent names the driver in the server's audit and access logs.
const userAgent = "authbench/1"

// maxBody bounds what we read of a response.
const maxBody = 1 << 20

// errNotLoopback is returned by the dialer for a non-loopback address.
var errNotLoopback = errors.New("refusing to connect to a non-loopback address")

// newHTTPClient returns the one client of a run: a Transport that keeps
// conns idle connections to the one host, no proxy, and a dialer that
// refuses any address that is not loopback (in case "localhost" resolves
// somewhere else). Timeouts are per request, through the context.
func newHTTPClient(conns int) *http.Client {
	d := &net.Dialer{
		Timeout:   5 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !ap.Addr().Unmap().IsLoopback() {
				return fmt.Errorf("%w: %s", errNotLoopback, address)
			}
			return nil
		},
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		MaxIdleConns:          conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: tr,
		// The API never redirects; following one could leave loopback.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// quoteForm protects a form value from the server's second percent-
// decoding (privacyIDEA's check_unquote, spec/validate-token-auth.md §0):
// after the form decoding a '%' would start an escape again, so it is
// sent as "%25".
func quoteForm(v string) string { return strings.ReplaceAll(v, "%", "%25") }

// encodeForm encodes values for a form body, each quoted for the second
// decoding.
func encodeForm(values url.Values) string {
	q := make(url.Values, len(values))
	for k, vs := range values {
		for _, v := range vs {
			q.Add(k, quoteForm(v))
		}
	}
	return q.Encode()
}

// envelope is the part of privacyIDEA's JSON envelope the driver reads.
type envelope struct {
	raw    []byte // the whole answer
	Result struct {
		Status bool            `json:"status"`
		Value  json.RawMessage `json:"value"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"result"`
}

// apiError is a refused API call: the HTTP status and the server's error
// code and message (which carry no secrets of ours).
type apiError struct {
	Status  int
	Code    int
	Message string
}

func (e *apiError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d: %s (code %d)", e.Status, e.Message, e.Code)
}

// apiClient makes the admin API calls of the setup.
type apiClient struct {
	base    string // base URL without a trailing slash
	hc      *http.Client
	timeout time.Duration
	jwt     string // raw JWT for the Authorization header; never printed
}

// post sends form to path and returns the envelope of a successful
// answer (HTTP 200 and result.status true), or an error.
func (c *apiClient) post(ctx context.Context, path string, form url.Values) (*envelope, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(encodeForm(form)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", userAgent)
	if c.jwt != "" {
		req.Header.Set("Authorization", c.jwt)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return decodeEnvelope(resp.StatusCode, body)
}

// decodeEnvelope checks an answer: HTTP 200, a JSON envelope, status true.
func decodeEnvelope(status int, body []byte) (*envelope, error) {
	var env envelope
	jsonErr := json.Unmarshal(body, &env)
	if status != http.StatusOK || jsonErr != nil || !env.Result.Status {
		e := &apiError{Status: status}
		if jsonErr == nil && env.Result.Error != nil {
			e.Code, e.Message = env.Result.Error.Code, env.Result.Error.Message
		} else if jsonErr != nil {
			e.Message = "the answer is not a JSON envelope: " + snippet(body)
		} else if status == http.StatusOK {
			e.Message = "result.status is false"
		}
		return nil, e
	}
	env.raw = body
	return &env, nil
}

// snippet is the start of a body for an error message, single line.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 80 {
		b = append(b[:80:80], "..."...)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}
