// Package eventing keeps the event handler definitions and runs them around
// the operations of the library: before an operation (position "pre") and
// after it (position "post"), in the order of their ordering field, each
// only when all its conditions hold, each with its own audit entry.
//
// A definition names a handler module (UserNotification, Token, WebHook,
// ...) and one of its actions. Modules implement Module; the root registers
// the built-in ones and a Go program may register its own (Register).
//
// Side effects never happen inside a store transaction: post handlers run
// after the operation committed, pre handlers before it began.
package eventing

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// Positions of a definition.
const (
	Pre  = "pre"
	Post = "post"
)

// Definition is one event handler definition.
type Definition struct {
	ID            int               `json:"id"`
	Name          string            `json:"name"`
	Active        bool              `json:"active"`
	Ordering      int               `json:"ordering"`
	Position      string            `json:"position"`
	AbortOnError  bool              `json:"abort_on_error"`
	HandlerModule string            `json:"handlermodule"`
	Action        string            `json:"action"`
	Condition     string            `json:"condition"`
	Events        []string          `json:"event"`
	Options       map[string]string `json:"options"`
	Conditions    map[string]string `json:"conditions"`
}

// Clone returns a deep copy of d.
func (d Definition) Clone() Definition {
	d.Events = append([]string(nil), d.Events...)
	d.Options = maps.Clone(d.Options)
	d.Conditions = maps.Clone(d.Conditions)
	return d
}

// Response is an operation's answer as its JSON envelope carries it: the
// result's status and value (or error) and the detail. Post handlers read
// it (conditions on the result) and may change it (ResponseMangler,
// Federation); the caller then answers the changed response.
type Response struct {
	Status bool
	Value  any
	Detail map[string]any
	Error  *ResponseError
	// Changed is set by a handler that changed the response.
	Changed bool
}

// ResponseError is the error member of a failed result.
type ResponseError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Call is one operation as the handlers see it.
type Call struct {
	// Event is the operation's event name ("validate_check").
	Event string
	// Caller is who asked.
	Caller caller.Caller
	// Method and Path are the HTTP form of the operation ("POST",
	// "/validate/check"), for the handlers that re-send a request
	// (Federation).
	Method, Path string
	// Params are the request's parameters. Pre handlers may change them
	// (RequestMangler); the operation then reads the changed ones where
	// it supports that (see the root's documentation).
	Params map[string]any
	// User is the user the operation is about: the request's user, or
	// the token owner. Empty when there is none.
	User user.User
	// Serial and TokenType name the operation's single token, when it
	// has one (from the request, or, after an enrollment, its answer).
	Serial, TokenType string
	// TransactionID is the challenge transaction of the request or
	// answer.
	TransactionID string
	// Response is the operation's answer (post handlers only; nil in pre).
	Response *Response
	// Err is the operation's error (post handlers only).
	Err error
	// Pass is the request's password (the PIN and OTP of a validate
	// request): only the Federation module reads it, to forward the
	// request. It is never logged, never a tag, never in Params.
	Pass string
	// PIN is a PIN a handler set for the call's token ("set random
	// pin"), for the {pin} tag of the handlers after it. It is never part
	// of the answer and never logged.
	PIN string
	// Entry is the operation's audit entry as it was written (post), or
	// as it stood before the operation (pre).
	Entry audit.Entry
}

// Param returns the request parameter key as a string ("" when missing).
func (c *Call) Param(key string) string {
	switch v := c.Params[key].(type) {
	case string:
		return v
	case nil:
		return ""
	case bool:
		if v {
			return "True"
		}
		return "False"
	default:
		return toString(v)
	}
}

// OptionSpec describes one option of an action for GET /event/actions.
type OptionSpec struct {
	Type         string   `json:"type"`
	Required     bool     `json:"required,omitempty"`
	Description  string   `json:"description,omitempty"`
	Value        []string `json:"value,omitempty"`
	VisibleIf    string   `json:"visibleIf,omitempty"`
	VisibleValue string   `json:"visibleValue,omitempty"`
}

// Module is a handler module.
type Module interface {
	// Name is the module's name as definitions and the API name it
	// ("UserNotification").
	Name() string
	// Positions are the positions the module runs at.
	Positions() []string
	// DefaultAbort is the abort_on_error of a new definition that does
	// not set it.
	DefaultAbort() bool
	// Actions lists the module's actions with their options.
	Actions(ctx context.Context) (map[string]map[string]OptionSpec, error)
	// Check validates a definition's action and options when it is
	// stored; its error (a privacyIDEA-style parameter error) refuses the
	// definition.
	Check(ctx context.Context, d Definition) error
	// Do runs the definition's action for one call.
	Do(ctx context.Context, r *Run) error
}

// Run is one definition running for one call.
type Run struct {
	Def  Definition
	Call *Call
	// Position is Pre or Post.
	Position string
	svc      *Service
	facts    *facts
	started  time.Time
	// written is set when the module wrote the run's audit entry in its
	// own transaction (InTx).
	written bool
}

// Service returns the eventing service the run belongs to.
func (r *Run) Service() *Service { return r.svc }

// Abort is the error a module returns to stop the operation whatever the
// definition's abort_on_error says (a Script with raise_error).
type Abort struct{ Err error }

func (a *Abort) Error() string { return a.Err.Error() }
func (a *Abort) Unwrap() error { return a.Err }

// Host is what the eventing modules need of the library above them.
type Host interface {
	// EnrollToken enrolls a token of typ for owner (nil: no owner) with
	// the request parameters params, as the trusted local administrator
	// (audited as its own operation), and returns its serial.
	EnrollToken(ctx context.Context, typ string, owner *user.User, params map[string]string) (string, error)
	// AttachToken attaches token serial to application on the machine
	// named hostname ("": no machine) with options, as the trusted local
	// administrator (audited as its own operation).
	AttachToken(ctx context.Context, serial, application, hostname string, options map[string]string) error
}

// Config is what the service needs.
type Config struct {
	Store  store.Store
	Audit  *audit.Log
	Tokens *token.Service
	Realms *realm.Service
	Attrs  *user.Attributes
	Notify *notify.Service
	Host   Host
	Log    zerolog.Logger
	Now    func() time.Time
	Rand   io.Reader
	// Node is the node name for audit entries.
	Node string
	// ScriptDir is the directory of the Script module's executables
	// ("" disables the module's actions).
	ScriptDir string
	// SpoolDir is where UserNotification's savefile writes ("" refuses
	// savefile).
	SpoolDir string
	// HTTP is the client of WebHook and Federation.
	HTTP *http.Client
	// WebHookTimeout bounds one webhook request (default 10 s).
	WebHookTimeout time.Duration
	// URL is the server's public address for the {url} tag.
	URL string
	// Events are the event names the library fires (for Available).
	Events []string
}

// Errors.
var (
	errNotFound = errors.New("eventing: definition not found")
)
