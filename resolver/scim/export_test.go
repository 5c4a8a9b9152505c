package scim

import "net/url"

// UserURL exposes the /Users/<id> URL builder to the fuzz test.
func UserURL(base, id string) (*url.URL, bool, error) {
	b, err := parseBase("base", base)
	if err != nil {
		return nil, false, err
	}
	u, ok := userURL(b, id)
	return u, ok, nil
}

// ValidID exposes the id check.
func ValidID(id string) bool { return validID(id) }

// Quote exposes the filter string quoting.
func Quote(s string) string { return quote(s) }
