package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/store"
)

// The envelope: what every endpoint except the health probes and
// /validate/radiuscheck answers. Keys without a value are omitted, never
// sent as null (the PAM client aborts on a JSON null), but for the detail of
// an error envelope, which privacyIDEA always sends as null.
type envelope struct {
	ID            int       `json:"id"`
	JSONRPC       string    `json:"jsonrpc"`
	Result        envResult `json:"result"`
	Version       string    `json:"version,omitempty"`
	VersionNumber string    `json:"versionnumber,omitempty"`
	Time          float64   `json:"time"`
	Detail        any       `json:"detail,omitempty"`
	// AuthItems is the top-level "auth_items" of a /validate answer (the
	// offline application's values).
	AuthItems any `json:"auth_items,omitempty"`
}

// noDetail is the detail of an error envelope without details: privacyIDEA
// sends "detail": null there, and its clients read it with real privacyIDEA.
var noDetail = json.RawMessage("null")

type envResult struct {
	Status         bool      `json:"status"`
	Authentication string    `json:"authentication,omitempty"`
	Value          any       `json:"value,omitzero"`
	Error          *envError `json:"error,omitempty"`
}

type envError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

const (
	versionText = authsrv.Product + " " + authsrv.Version
	jsonType    = "application/json"
)

// The header values every JSON answer carries, shared: net/http only
// reads them.
var (
	jsonTypeHeader = []string{jsonType}
	noCacheHeader  = []string{"no-cache"}
)

// answer is what a handler produced.
type answer struct {
	value  any
	detail map[string]any
	// auth marks authentication-type endpoints: envelope id 2 and
	// result.authentication.
	auth bool
	// raw, when set, writes the whole response instead of the envelope
	// (file downloads).
	raw func(w http.ResponseWriter)
	// authItems, when set, is the envelope's top-level "auth_items".
	authItems map[string]any
}

// authentication computes result.authentication the way privacyIDEA does
// for id-2 answers (eventing.Authentication, which the event conditions
// share).
func authentication(value any, detail map[string]any) string {
	return eventing.Authentication(value, detail)
}

// writeJSON writes v with the headers every answer carries.
func writeJSON(w http.ResponseWriter, status int, v any) {
	bp := envBufs.Get().(*[]byte)
	buf := bytes.NewBuffer((*bp)[:0])
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"id":1,"jsonrpc":"2.0","result":{"status":false,"error":{"code":903,"message":"ERR903: Internal server error."}}}`)
	}
	*bp = buf.Bytes()
	writeBody(w, status, bp)
}

// writeEnvelope writes env, without reflection when appendEnvelope knows
// all its values.
func writeEnvelope(w http.ResponseWriter, status int, env *envelope) {
	bp := envBufs.Get().(*[]byte)
	b, ok := appendEnvelope((*bp)[:0], env)
	if !ok {
		envBufs.Put(bp)
		writeJSON(w, status, *env)
		return
	}
	*bp = b
	writeBody(w, status, bp)
}

// writeBody writes the encoded answer *bp with the headers every answer
// carries, and recycles the buffer.
func writeBody(w http.ResponseWriter, status int, bp *[]byte) {
	h := w.Header()
	h["Content-Type"] = jsonTypeHeader
	h["Cache-Control"] = noCacheHeader
	h["Content-Length"] = []string{strconv.Itoa(len(*bp))}
	w.WriteHeader(status)
	_, _ = w.Write(*bp)
	if cap(*bp) <= maxPooledBuf {
		*bp = (*bp)[:0]
		envBufs.Put(bp)
	}
}

func unixTime(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// writeAnswer writes a success envelope.
func (a *api) writeAnswer(w http.ResponseWriter, ans answer) { a.writeAnswerAs(w, ans, hardening{}) }

// writeAnswerAs writes a success envelope shaped by the hardening policies.
func (a *api) writeAnswerAs(w http.ResponseWriter, ans answer, h hardening) {
	env := envelope{
		ID: 1, JSONRPC: "2.0",
		Result:  envResult{Status: true, Value: ans.value},
		Version: versionText, VersionNumber: authsrv.Version,
		Time: unixTime(a.s.Now()),
	}
	if h.hideVersion {
		env.Version, env.VersionNumber = "", ""
	}
	if ans.auth {
		env.ID = 2
		env.Result.Authentication = authentication(ans.value, ans.detail)
	}
	if ans.detail != nil {
		ans.detail["threadid"] = a.seq.Add(1)
		env.Detail = ans.detail
	}
	if ans.authItems != nil {
		env.AuthItems = ans.authItems
	}
	writeEnvelope(w, http.StatusOK, &env)
}

// writeError maps err through apierr and writes the error envelope. An
// error without a code is logged with the request id and answered with a
// generic text; its cause never reaches the client.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	a.writeErrorAs(w, r, err, hardening{})
}

// writeAnonError is writeError for an answer outside a route's handler
// (unknown path, wrong method, panic), where nobody is logged in.
func (a *api) writeAnonError(w http.ResponseWriter, r *http.Request, err error) {
	a.writeErrorAs(w, r, err, a.anonHardening(r))
}

// storeWriteError maps a change the store refused (store.ErrWriteFailed,
// whatever wraps it) to apierr.StoreWrite: a clear 503 instead of a generic
// server error, and nothing logged per request (the server logs the store's
// failure once, when it begins). Other errors are returned as they are.
func storeWriteError(err error) error {
	we, ok := errors.AsType[*store.WriteError](err)
	if !ok {
		return err
	}
	e := &apierr.Error{Code: apierr.StoreWrite, Err: err}
	if !we.NoSpace() {
		e.Text = "The server cannot store changes: the data directory cannot be written."
	}
	return e
}

// writeErrorAs is writeError shaped by the hardening policies: no version,
// and 401 for every client error.
func (a *api) writeErrorAs(w http.ResponseWriter, r *http.Request, err error, h hardening) {
	number, status, message, detail, internal := apierr.Wire(storeWriteError(err))
	if internal {
		zerolog.Ctx(r.Context()).Error().Err(err).Msg("internal error")
	}
	env := envelope{
		ID: 1, JSONRPC: "2.0",
		Result:  envResult{Status: false, Error: &envError{Code: number, Message: message}},
		Version: versionText,
		Time:    unixTime(a.s.Now()),
		Detail:  noDetail,
	}
	switch {
	case len(detail) > 0:
		d := make(map[string]any, len(detail)+1)
		for k, v := range detail {
			d[k] = v
		}
		d["threadid"] = a.seq.Add(1)
		env.Detail = d
	case status == http.StatusUnauthorized && r.URL.Path == "/auth":
		// privacyIDEA's failed login carries the (empty) details of its
		// credential check: {} without threadid.
		env.Detail = map[string]any{}
	}
	if h.hideVersion {
		env.Version = ""
	}
	if h.authStatus && clientError(status) {
		status = http.StatusUnauthorized
	}
	writeEnvelope(w, status, &env)
}
