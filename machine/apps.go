package machine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// The option types an application declares (privacyIDEA's policy types).
const (
	OptionStr  = "str"
	OptionInt  = "int"
	OptionBool = "bool"
)

// OptionSpec describes one option of a machine token binding, as GET
// /application/ shows it.
type OptionSpec struct {
	// Type is OptionStr, OptionInt or OptionBool.
	Type string
	// Description is shown to administrators ("" for none).
	Description string
	// Value, when not nil, lists the values to choose from (a []int, a
	// []string, ...); an empty list stays in the answer.
	Value any
}

// AuthItemRequest is what a client asks GET /machine/authitem for, as an
// application sees it.
type AuthItemRequest struct {
	// Hostname is the machine that asks (required by the endpoint; a
	// service_id filter overrules it in the selection).
	Hostname string
	// Application is the application asked for ("" for all).
	Application string
	// Serial is the serial the request names ("" for none); items carry
	// it as "serial".
	Serial string
	// Challenge is the client's challenge ("" for none): the luks
	// application answers it, the offline application splits a PIN from
	// it.
	Challenge string
	// Filter holds the request's other parameters: the option filters of
	// the selection (the ssh application also compares "user").
	Filter map[string]string
	// UserAgent is the client's User-Agent header.
	UserAgent string
	// Also run in the transaction of a change an application makes to
	// hand out its item (the offline application moves the token's
	// counter): the caller's audit entry commits with that change.
	Also []func(store.Tx) error
}

// App is a machine application: what a token attached to a machine or a
// service ID is for (ssh, offline, luks). An application is stateless
// towards the bindings: it reads the binding and its token and returns
// the authentication item.
type App interface {
	// Name is the application's name ("ssh").
	Name() string
	// Options returns the options a binding may carry, per token type:
	// token type -> option name -> spec. A token type with no options
	// maps to an empty map.
	Options(ctx context.Context) (map[string]map[string]OptionSpec, error)
	// AuthItem returns the authentication item of binding b, whose token
	// is t, for req; ok is false when t gives none (a token type the
	// application does not serve, an inactive token, a filter that does
	// not match). The caller adds the binding's options and "serial".
	// An application that changes the token (offline moves its counter)
	// does it in its own store write here.
	AuthItem(ctx context.Context, b Binding, t *token.Token, req AuthItemRequest) (item map[string]any, ok bool, err error)
}

// Apps is the registry of machine applications. The root builds it with
// the applications it ships; an embedder may register more. It is safe
// for concurrent use.
type Apps struct {
	mu   sync.RWMutex
	apps map[string]App
}

// NewApps returns a registry holding apps.
func NewApps(apps ...App) *Apps {
	a := &Apps{apps: map[string]App{}}
	for _, app := range apps {
		a.Register(app)
	}
	return a
}

// Register adds app, replacing an application of the same name.
func (a *Apps) Register(app App) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.apps[app.Name()] = app
}

// Get returns the application name.
func (a *Apps) Get(name string) (App, bool) {
	if a == nil {
		return nil, false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	app, ok := a.apps[name]
	return app, ok
}

// Names lists the registered applications, sorted.
func (a *Apps) Names() []string {
	if a == nil {
		return nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Sorted(maps.Keys(a.apps))
}

// Describe returns what GET /application/ answers: per application its
// options per token type, {"ssh": {"options": {"sshkey": {...}}}}.
func (a *Apps) Describe(ctx context.Context) (map[string]map[string]map[string]map[string]OptionSpec, error) {
	out := map[string]map[string]map[string]map[string]OptionSpec{}
	for _, name := range a.Names() {
		app, _ := a.Get(name)
		opts, err := app.Options(ctx)
		if err != nil {
			return nil, err
		}
		if opts == nil {
			opts = map[string]map[string]OptionSpec{}
		}
		out[name] = map[string]map[string]map[string]OptionSpec{"options": opts}
	}
	return out, nil
}

// errUnknownApp is privacyIDEA's answer for an application it does not
// have; the list is rendered as Python renders the keys of its
// application dictionary.
func (a *Apps) errUnknownApp(name string) error {
	names := a.Names()
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	return apierr.Newf(apierr.Parameter, "Application %s is not supported. Valid applications are dict_keys([%s]).", name, strings.Join(quoted, ", "))
}
