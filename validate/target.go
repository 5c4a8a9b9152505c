package validate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/user"
)

// target is who a request is about: the user as the request names it
// after the request policies, resolved in its realm (or the owner of the
// serial's token), the user store instance that holds the user, and
// whether the user exists; every other part of the request reads the user
// here.
type target struct {
	v   *Validator
	r   *Request
	pol *policies
	u   user.User
	in  *resolver.Instance
	// found is set when the user exists (resolved, or the token's owner).
	found bool
}

// resolve applies the request policies (set_realm, setrealm, mangle) and
// resolves the user.
func (t *target) resolve(ctx context.Context) error {
	login, realmName := "", ""
	if t.r.User != "" {
		login, realmName = user.Split(t.r.User, func(s string) bool { return t.v.cfg.Realms.Exists(ctx, s) }, t.v.splitAtSign())
		if t.r.Realm != "" {
			// An explicit realm wins over the one split off the login.
			realmName = realm.Normalize(t.r.Realm)
		}
	}
	if t.pol.any() {
		var err error
		if login, realmName, err = t.requestPolicies(ctx, login, realmName); err != nil {
			return err
		}
	}
	if t.r.User == "" {
		return nil
	}
	return t.resolveUser(ctx, login, realmName)
}

// resolveUser looks login up in realmName (in the request's resolver, when
// it names one); a user who does not exist is kept as named.
func (t *target) resolveUser(ctx context.Context, login, realmName string) error {
	var err error
	if t.r.Resolver != "" {
		t.u, t.in, err = t.v.cfg.Realms.ResolveIn(ctx, login, realmName, t.r.Resolver)
	} else {
		t.u, t.in, err = t.v.cfg.Realms.Resolve(ctx, login, realmName)
	}
	switch {
	case err == nil:
		t.found = true
	case errors.Is(err, realm.ErrNoUser), errors.Is(err, resolver.ErrNoUser):
		if t.u.Realm == "" {
			t.u.Realm = realm.Normalize(realmName)
		}
		t.u.Login = login
	case errors.Is(err, realm.ErrNotFound):
		t.u = user.User{Login: login, Realm: realm.Normalize(realmName)}
	default:
		return err
	}
	return nil
}

// requestPolicies applies the request policies before the user is
// resolved: AUTH set_realm (it wins), else AUTHZ setrealm, then every
// AUTH mangle in priority order on user, realm and pass.
func (t *target) requestPolicies(ctx context.Context, login, realmName string) (string, string, error) {
	if login != "" && realmName == "" {
		def, err := t.v.cfg.Realms.Default(ctx)
		if err != nil {
			return "", "", err
		}
		realmName = def
	}
	snap := t.pol.snap
	pre := user.User{Login: login, Realm: realmName}
	auth, err := snap.Scoped(ctx, t.pol.query(ctx, policy.ScopeAuthentication, pre))
	if err != nil {
		return "", "", err
	}
	if login != "" {
		rn, names, err := unique(auth, "set_realm")
		if err != nil {
			return "", "", err
		}
		if rn == "" {
			authz, err := snap.Scoped(ctx, t.pol.query(ctx, policy.ScopeAuthorization, pre))
			if err != nil {
				return "", "", err
			}
			if rn, names, err = unique(authz, "setrealm"); err != nil {
				return "", "", err
			}
		}
		if rn != "" {
			t.pol.note(names...)
			realmName = realm.Normalize(rn)
			if realmName != pre.Realm {
				pre.Realm = realmName
				if auth, err = snap.Scoped(ctx, t.pol.query(ctx, policy.ScopeAuthentication, pre)); err != nil {
					return "", "", err
				}
			}
		}
	}
	specs, names, err := values(auth, "mangle")
	if err != nil {
		return "", "", err
	}
	for i, spec := range specs {
		if mangle(spec, &login, &realmName, &t.r.Pass) {
			t.pol.note(names[i])
		}
	}
	return login, realm.Normalize(realmName), nil
}

// mangle applies one mangle value, key/regex/replacement/, to the user
// login, the realm or the password. It reports whether the value was
// applied (an empty parameter or a malformed value is left alone).
func mangle(spec string, login, realmName, pass *string) bool {
	parts := strings.SplitN(spec, "/", 4)
	if len(parts) < 3 {
		return false
	}
	var target *string
	switch strings.TrimSpace(parts[0]) {
	case "user":
		target = login
	case "realm":
		target = realmName
	case "pass":
		target = pass
	default:
		return false
	}
	if *target == "" {
		return false
	}
	re, err := regexp.Compile(parts[1])
	if err != nil {
		return false
	}
	*target = re.ReplaceAllString(*target, pyReplacement(parts[2]))
	return true
}

// pyReplacement turns a Python re.sub replacement (\1, \g<1>, \g<name>,
// \\) into Go's template syntax; a literal $ stays literal.
func pyReplacement(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			b.WriteString("$$")
		case c == '\\' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i + 1
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			b.WriteString("${" + s[i+1:j] + "}")
			i = j - 1
		case c == '\\' && strings.HasPrefix(s[i+1:], "g<"):
			end := strings.IndexByte(s[i+3:], '>')
			if end < 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteString("${" + s[i+3:i+3+end] + "}")
			i += 3 + end
		case c == '\\' && i+1 < len(s) && s[i+1] == '\\':
			b.WriteByte('\\')
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ownerStore returns the user store that holds the user: on the serial
// path, where the owner was not resolved, that of the owner's resolver,
// looked up until it is found (nil when there is none).
func (t *target) ownerStore(ctx context.Context, ownerResolver string) (*resolver.Instance, error) {
	if t.in == nil && t.v.cfg.Resolvers != nil {
		in, err := t.v.cfg.Resolvers.Instance(ctx, ownerResolver)
		if err != nil && !errors.Is(err, resolver.ErrNotFound) {
			return nil, err
		}
		t.in = in
	}
	return t.in, nil
}

// checkPassword checks pw as the user's user store password, each
// distinct value once per request (memo holds the answers).
func (t *target) checkPassword(ctx context.Context, pw string, memo map[string]bool) (bool, error) {
	if t.in == nil || pw == "" {
		return false, nil
	}
	if ok, seen := memo[pw]; seen {
		return ok, nil
	}
	ok, err := t.in.CheckPassword(ctx, t.u.UID, pw)
	if err != nil {
		return false, err
	}
	memo[pw] = ok
	return ok, nil
}

// info reads the user's attributes from the user store as strings (none
// when the store does not answer).
func (t *target) info(ctx context.Context) map[string]string {
	info := map[string]string{}
	if t.in == nil || t.u.UID == "" {
		return info
	}
	ui, err := t.in.User(ctx, t.u.UID)
	if err != nil {
		return info
	}
	return ui.Strings()
}

// errUnknown is the error for a user that does not exist.
func (t *target) errUnknown() error {
	return apierr.New(apierr.User, fmt.Sprintf("User %s does not exist.", t.u.String()))
}
