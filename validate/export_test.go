package validate

// Exported for the external tests of the policy value parsers.
var (
	ParseDelta     = parseDelta
	PyDelta        = pyDelta
	PyReplacement  = pyReplacement
	Mangle         = mangle
	LastAuthFresh  = lastAuthFresh
	LastAuthLayout = lastAuthLayout
)

// ParseAuthCache returns the parts of an auth_cache value.
func ParseAuthCache(v string) (maxAge, idle int64, maxUses int, ok bool) {
	p, ok := parseAuthCache(v)
	return int64(p.maxAge), int64(p.idle), p.maxUses, ok
}
