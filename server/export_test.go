package server

// ---- Hooks for the parameter decoder (params.go). Used by params_test.go and
// params_fuzz_test.go. ----

// Params is the merged request parameters.
type Params = params

// Limits of the parameter decoder.
const (
	BodyLimitAuth  = bodyLimitAuth
	BodyLimitAdmin = bodyLimitAdmin
	MaxParams      = maxParams
	MaxJSONDepth   = maxJSONDepth
)

var (
	// DecodeParams is decodeParams.
	DecodeParams = decodeParams
	// Unquote is the second percent-decoding (Python's urllib.parse.unquote).
	Unquote = unquote
)

func (p *params) Has(key string) bool                      { return p.has(key) }
func (p *params) Raw(key string) (any, bool)               { return p.raw(key) }
func (p *params) Str(key string) (string, error)           { return p.str(key) }
func (p *params) Required(key string) (string, error)      { return p.required(key) }
func (p *params) Boolean(key string) (bool, error)         { return p.boolean(key) }
func (p *params) Integer(key string, def int) (int, error) { return p.integer(key, def) }
func (p *params) List(key string) ([]string, error)        { return p.list(key) }
func (p *params) Keys() []string                           { return p.keys() }
func (p *params) Prefixed(prefix string) map[string]any    { return p.prefixed(prefix) }
func (p *params) File(name string) ([]byte, string, bool)  { return p.file(name) }
func (p *params) Set(key string, v any)                    { p.set(key, v) }

// ---- End of the parameter decoder hooks. ----
