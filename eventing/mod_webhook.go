package eventing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
)

// The content types of a webhook.
const (
	contentJSON = "application/json"
	contentForm = "application/x-www-form-urlencoded"
)

const (
	defaultWebHookTimeout = 10 * time.Second
	// maxWebHookAnswer caps what is read of a webhook's answer (to reuse
	// the connection); the answer itself is never used.
	maxWebHookAnswer = 64 << 10
)

// webHook is the WebHook module: it posts a JSON or form body to a URL.
// The POST runs in the background (Service.Background), so that a slow or
// unreachable receiver never holds up the operation; the handler's audit
// entry is written when the POST is done, a failure as a failure (the log
// says why).
type webHook struct {
	s *Service
	// client is the default client, used when the configuration has
	// none: its dialer refuses loopback, private and the other special
	// ranges (netguard's safe default, spec reliability A11).
	client *http.Client
}

func newWebHook(s *Service) Module {
	timeout := s.cfg.WebHookTimeout
	if timeout <= 0 {
		timeout = defaultWebHookTimeout
	}
	var guard *netguard.Policy // nil: the safe default policy
	tr := &http.Transport{
		DialContext:           guard.Dialer(timeout).DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &webHook{s: s, client: &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: noRedirect}}
}

var _ Module = (*webHook)(nil)

// noRedirect stops at the first answer: a webhook is not redirected (a
// redirect could lead the POST to a host the administrator did not name).
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (w *webHook) Name() string        { return "WebHook" }
func (w *webHook) Positions() []string { return []string{Post, Pre} }
func (w *webHook) DefaultAbort() bool  { return false }

func (w *webHook) Actions(context.Context) (map[string]map[string]OptionSpec, error) {
	return map[string]map[string]OptionSpec{"post_webhook": {
		"URL": {Type: "str", Required: true, Description: "The http or https URL the webhook is posted to."},
		"content_type": {Type: "str", Required: true, Description: "How the data is encoded.",
			Value: []string{contentJSON, contentForm}},
		"replace": {Type: "bool", Description: "Substitute tags in the data: the notification tags without {pin}, " +
			"{registrationcode} and the enrollment URLs, plus {challenge}, {logged_in_user}, {token_serial}, " +
			"{token_owner} and {user_realm}."},
		"data": {Type: "str", Required: true, Description: "The data posted: JSON text, or for a form a JSON object or key=value&key2=value2."},
	}}, nil
}

// webHookContentType returns the content type an option names (the
// legacy names json and urlencoded included).
func webHookContentType(v string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case contentJSON, "json":
		return contentJSON, true
	case contentForm, "urlencoded", "urlendcode":
		return contentForm, true
	}
	return "", false
}

// webHookURL parses and checks the URL option: http or https with a host.
func webHookURL(v string) (*url.URL, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, apierr.MissingParameter("URL")
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return nil, paramErr("The webhook URL must be an http or https URL.")
	}
	return u, nil
}

func (w *webHook) Check(_ context.Context, d Definition) error {
	o := d.Options
	if _, err := webHookURL(o["URL"]); err != nil {
		return err
	}
	if strings.TrimSpace(o["content_type"]) == "" {
		return apierr.MissingParameter("content_type")
	}
	ct, ok := webHookContentType(o["content_type"])
	if !ok {
		return paramErr("The content_type must be application/json or application/x-www-form-urlencoded.")
	}
	data, ok := o["data"]
	if !ok || strings.TrimSpace(data) == "" {
		return apierr.MissingParameter("data")
	}
	_, err := webHookBody(ct, data, nil)
	return err
}

func (w *webHook) Do(ctx context.Context, r *Run) error {
	if !strings.EqualFold(r.Def.Action, "post_webhook") {
		return paramErr("Unknown action for WebHook: " + r.Def.Action)
	}
	o := r.Def.Options
	u, err := webHookURL(o["URL"])
	if err != nil {
		return err
	}
	ct, ok := webHookContentType(o["content_type"])
	if !ok {
		return paramErr("The content_type must be application/json or application/x-www-form-urlencoded.")
	}
	if w.s.Busy() {
		// The queue is full: the POST would be dropped, so its body is
		// not built (a slow receiver must not make the requests slower).
		done := r.Detach(ctx)
		done(w.s.Background("webhook "+r.Def.Name, nil))
		return nil
	}
	var tags map[string]string
	if IsTrue(o["replace"]) {
		tags = r.webHookTags(ctx, usedTags(o["data"]))
	}
	body, err := webHookBody(ct, o["data"], tags)
	if err != nil {
		return err
	}
	target, host := u.String(), u.Host
	handler, reqID := r.Def.Name, r.Call.Caller.RequestID
	done := r.Detach(ctx)
	if err := w.s.Background("webhook "+handler, func(ctx context.Context) {
		done(w.post(ctx, target, host, ct, body, handler, reqID))
	}); err != nil {
		done(err)
	}
	return nil
}

// webHookTags are the tags of a webhook's data: the notification tags
// without the secret ones, plus {challenge} (the transaction id of the
// operation's challenge) and privacyIDEA's webhook names.
func (r *Run) webHookTags(ctx context.Context, want map[string]bool) map[string]string {
	if want != nil {
		// The aliases need their originals.
		for alias, orig := range map[string]string{"token_serial": "serial", "token_owner": "username", "user_realm": "userrealm"} {
			if want[alias] {
				want[orig] = true
			}
		}
	}
	t := withoutSecrets(r.tagsFor(ctx, false, want))
	tid := r.Call.TransactionID
	if tid == "" && r.Call.Response != nil {
		tid = detailString(r.Call.Response.Detail, "transaction_id")
	}
	if tid == "" {
		tid = r.Call.Param("transaction_id")
	}
	t["challenge"] = tid
	// privacyIDEA names the request's user logged_in_user, and the
	// logged-in caller when the request has no user.
	t["logged_in_user"] = r.Call.User.Login
	if t["logged_in_user"] == "" {
		t["logged_in_user"] = r.Call.Caller.Name
	}
	t["token_serial"] = t["serial"]
	t["token_owner"] = t["username"]
	t["user_realm"] = t["userrealm"]
	return t
}

// webHookBody builds the encoded body of data, with tags substituted when
// tags is not nil. JSON data is decoded, substituted in its keys and
// string values and encoded again, so that a tag value cannot change the
// structure; form data is substituted after it is split into keys and
// values, and encoded again.
func webHookBody(ct, data string, tags map[string]string) ([]byte, error) {
	if ct == contentJSON {
		v, err := webHookDecode(data)
		if err != nil {
			return nil, paramErr("The webhook data is not valid JSON.")
		}
		if tags != nil {
			v = webHookReplace(v, tags)
		}
		return webHookEncode(v)
	}
	form := url.Values{}
	if strings.HasPrefix(strings.TrimSpace(data), "{") {
		v, err := webHookDecode(data)
		obj, ok := v.(map[string]any)
		if err != nil || !ok {
			return nil, paramErr("The webhook data is neither a JSON object nor key=value pairs.")
		}
		for k, x := range obj {
			s, ok := x.(string)
			if !ok {
				b, err := webHookEncode(x)
				if err != nil {
					return nil, err
				}
				s = string(b)
			}
			form.Add(k, s)
		}
	} else {
		q, err := url.ParseQuery(strings.TrimSpace(data))
		if err != nil {
			return nil, paramErr("The webhook data is neither a JSON object nor key=value pairs.")
		}
		form = q
	}
	if tags != nil {
		out := url.Values{}
		for k, vs := range form {
			for _, v := range vs {
				out.Add(replaceTags(k, tags), replaceTags(v, tags))
			}
		}
		form = out
	}
	return []byte(form.Encode()), nil
}

// webHookDecode decodes one JSON value, keeping numbers as they are
// written.
func webHookDecode(data string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// webHookEncode encodes v without escaping <, > and & (the receiver is not
// a browser).
func webHookEncode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// webHookReplace substitutes tags in the keys and string values of v, at
// every depth.
func webHookReplace(v any, tags map[string]string) any {
	switch x := v.(type) {
	case string:
		return replaceTags(x, tags)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[replaceTags(k, tags)] = webHookReplace(e, tags)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = webHookReplace(e, tags)
		}
		return out
	}
	return v
}

// httpClient is the configured client without redirects, or the default.
func (w *webHook) httpClient() *http.Client {
	if w.s.cfg.HTTP == nil {
		return w.client
	}
	c := *w.s.cfg.HTTP
	c.CheckRedirect = noRedirect
	return &c
}

// post sends one webhook and logs its outcome with the URL's host only
// (the path and query may hold credentials, the body user data).
func (w *webHook) post(ctx context.Context, target, host, ct string, body []byte, handler, reqID string) error {
	timeout := w.s.cfg.WebHookTimeout
	if timeout <= 0 {
		timeout = defaultWebHookTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log := w.s.cfg.Log.With().Str("component", "eventing").Str("handler", handler).Str("host", host).
		Str("request_id", reqID).Logger()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		log.Warn().Msg("webhook request could not be built")
		return errors.New("webhook request could not be built")
	}
	req.Header.Set("Content-Type", ct)
	res, err := w.httpClient().Do(req)
	if err != nil {
		// url.Error repeats the whole URL: keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		log.Warn().Str("error", err.Error()).Int64("duration_ms", time.Since(start).Milliseconds()).Msg("webhook failed")
		return errWebHookFailed
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxWebHookAnswer))
	_ = res.Body.Close()
	ev := log.Debug()
	msg := "webhook posted"
	if res.StatusCode < 200 || res.StatusCode > 299 {
		ev, msg = log.Warn(), fmt.Sprintf("webhook answered HTTP %d", res.StatusCode)
	}
	ev.Int("status", res.StatusCode).Int64("duration_ms", time.Since(start).Milliseconds()).Msg(msg)
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return errWebHookFailed
	}
	return nil
}

// errWebHookFailed is the failure of a POST (the log says why).
var errWebHookFailed = &webHookError{}

type webHookError struct{}

func (*webHookError) Error() string { return "the webhook receiver did not accept the request" }
