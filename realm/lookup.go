package realm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/user"
)

// Resolve finds login in realm (the default realm when realm is ""): the
// first resolver by priority that knows the login wins, later ones are not
// asked. It returns ErrNotFound for an unknown realm and ErrNoUser when no
// resolver knows the login; when a resolver failed and no other one knew
// the user, that failure is returned instead.
func (s *Service) Resolve(ctx context.Context, login, realm string) (user.User, *resolver.Instance, error) {
	if realm == "" {
		def, err := s.Default(ctx)
		if err != nil {
			return user.User{}, nil, err
		}
		if def == "" {
			return user.User{Login: login}, nil, ErrNotFound
		}
		realm = def
	}
	r, _, err := s.get(ctx, realm)
	if err != nil {
		return user.User{Login: login, Realm: Normalize(realm)}, nil, err
	}
	u := user.User{Login: login, Realm: r.Name}
	if login == "" {
		return u, nil, ErrNoUser
	}
	var firstErr error
	for _, e := range s.Ordered(r) {
		in, err := s.cfg.Resolvers.Instance(ctx, e.Name)
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		uid, err := in.UserID(ctx, login)
		if errors.Is(err, resolver.ErrNoUser) {
			continue
		}
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		u.Resolver, u.UID = in.Name(), uid
		return u, in, nil
	}
	if firstErr != nil {
		return u, nil, firstErr
	}
	return u, nil, ErrNoUser
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// ResolveIn finds login in one resolver of realm (an explicitly named
// resolver). It returns ErrNoUser when the resolver does not know the
// login.
func (s *Service) ResolveIn(ctx context.Context, login, realm, resolverName string) (user.User, *resolver.Instance, error) {
	u := user.User{Login: login, Realm: Normalize(realm)}
	in, err := s.cfg.Resolvers.Instance(ctx, resolverName)
	if err != nil {
		return u, nil, err
	}
	uid, err := in.UserID(ctx, login)
	if err != nil {
		if errors.Is(err, resolver.ErrNoUser) {
			return u, nil, ErrNoUser
		}
		return u, nil, err
	}
	u.Resolver, u.UID = in.Name(), uid
	return u, in, nil
}

// Listed is one user of a listing.
type Listed struct {
	Info     resolver.Info
	Realm    string
	Resolver string
	Editable bool
}

// Users lists users. The realms scanned are the given ones; else those
// containing resolverName; else all. Per realm the resolvers are asked in
// priority order (only resolverName when it is given without realms), and
// a user is listed once per realm (the first resolver wins). A resolver
// that fails or cannot search by a key of filter is skipped.
func (s *Service) Users(ctx context.Context, realms []string, resolverName string, filter map[string]string) ([]Listed, error) {
	list, _, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	var scan []Realm
	switch {
	case len(realms) > 0:
		for _, name := range realms {
			for _, r := range list {
				if r.Name == Normalize(name) && !slices.ContainsFunc(scan, func(x Realm) bool { return x.Name == r.Name }) {
					scan = append(scan, r)
				}
			}
		}
		resolverName = "" // with a realm the resolver is ignored, as privacyIDEA does
	case resolverName != "":
		for _, r := range list {
			if slices.ContainsFunc(r.Resolvers, func(e Entry) bool { return strings.EqualFold(e.Name, resolverName) }) {
				scan = append(scan, r)
			}
		}
	default:
		scan = list
	}
	out := []Listed{}
	for _, r := range scan {
		seen := map[string]bool{}
		for _, e := range s.Ordered(r) {
			if resolverName != "" && !strings.EqualFold(e.Name, resolverName) {
				continue
			}
			in, err := s.cfg.Resolvers.Instance(ctx, e.Name)
			if err != nil {
				continue
			}
			infos, err := in.Search(ctx, filter)
			if err != nil {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("listing users: %w", ctx.Err())
				}
				continue
			}
			for _, info := range infos {
				name := info.String(resolver.KeyUsername)
				if seen[name] {
					continue
				}
				seen[name] = true
				out = append(out, Listed{Info: info, Realm: r.Name, Resolver: in.Name(), Editable: in.Editable()})
			}
		}
	}
	return out, nil
}
