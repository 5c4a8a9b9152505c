package validate

import (
	"context"

	"github.com/authsrv/authsrv/token"
)

// samlAttributes are the attributes /validate/samlcheck answers with for
// the user of res: username, realm and resolver, the user store's
// attributes (never a password), and email, surname, givenname, mobile
// and phone as nil when the store has none, as privacyIDEA sends them.
// The system settings ReturnSamlAttributes (default on) and
// ReturnSamlAttributesOnFail (default off) decide whether any are sent.
func (v *Validator) samlAttributes(ctx context.Context, res Response) map[string]any {
	attrs := map[string]any{}
	set := v.cfg.Tokens.Settings()
	send := set.Value("ReturnSamlAttributes") == "" || token.IsTrue(set.Value("ReturnSamlAttributes"))
	if !send || (!res.Value && !token.IsTrue(set.Value("ReturnSamlAttributesOnFail"))) || res.User.UID == "" {
		return attrs
	}
	attrs["username"], attrs["realm"], attrs["resolver"] = res.User.Login, res.User.Realm, res.User.Resolver
	if v.cfg.Resolvers != nil {
		if in, err := v.cfg.Resolvers.Instance(ctx, res.User.Resolver); err == nil {
			if info, err := in.User(ctx, res.User.UID); err == nil {
				for k, val := range info {
					if k != "password" {
						attrs[k] = val
					}
				}
			}
		}
	}
	for _, k := range []string{"email", "surname", "givenname", "mobile", "phone"} {
		if _, ok := attrs[k]; !ok {
			attrs[k] = nil
		}
	}
	return attrs
}
