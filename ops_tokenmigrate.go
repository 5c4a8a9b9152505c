package authsrv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// MigratedImportResult is what ImportMigratedTokens did.
type MigratedImportResult struct {
	Imported    int
	NotImported []TokenImportFailure
	// Owners are the owners of the imported tokens, by serial, with the
	// login read from their resolvers.
	Owners map[string]user.User
}

// ReasonOwnerUnknown starts the NotImported reason of a migrated token
// whose owner its resolver does not know (a user deleted from the user
// store): the caller may import it again without an owner.
const ReasonOwnerUnknown = "the owner does not exist"

// ImportMigratedTokens adopts tokens from another authentication server
// (administrators, right "importtokens"), with their secrets, PIN hashes,
// counters and state (see token.Migrated). The tokens are written in
// batches of up to importBatchSize, each in one store transaction with
// an audit entry naming how many it brought in.
//
// A record's owner names its realm, resolver and user id; the login is
// read from the resolver when the record leaves it empty. A record whose
// realm (the owner's or a token realm) does not exist, whose resolver is
// not one of the owner's realm, or whose owner the resolver does not know
// is reported in NotImported, as are the records the token service
// refuses (an existing serial, an unknown type, a secret the type
// refuses). An error is a failure of the store or of a user store: what
// was committed before it stays.
func (o *Ops) ImportMigratedTokens(ctx context.Context, who caller.Caller, recs []token.Migrated) (MigratedImportResult, error) {
	res := MigratedImportResult{Owners: map[string]user.User{}}
	err := o.run(ctx, who, opSpec{event: "token_load", action: "POST /token/load/migrated", right: "importtokens"}, func(ctx context.Context, r *opRun) error {
		if !who.IsAdmin() {
			return errAdminOnly
		}
		todo := make([]token.Migrated, 0, len(recs))
		owners := map[string]*user.User{}
		for _, m := range recs {
			reason, err := o.migratedRealms(ctx, &m)
			if err != nil {
				return err
			}
			if reason != "" {
				res.NotImported = append(res.NotImported, TokenImportFailure{Serial: m.Serial, Reason: reason})
				continue
			}
			todo = append(todo, m)
			owners[m.Serial] = m.Owner
		}
		batches := 0
		for start := 0; start < len(todo); start += importBatchSize {
			end := min(start+importBatchSize, len(todo))
			b := o.s.tokens.PrepareMigrated(ctx, todo[start:end])
			for _, f := range b.Failed {
				res.NotImported = append(res.NotImported, TokenImportFailure{Serial: f.Serial, Reason: f.Reason})
			}
			n := len(b.Serials())
			if n == 0 {
				continue
			}
			batches++
			total := res.Imported + n
			if batches == 1 && end == len(todo) {
				r.Entry.Info = "imported " + strconv.Itoa(total) + " migrated tokens"
			} else {
				r.Entry.Info = fmt.Sprintf("imported %d migrated tokens (batch %d: %d tokens so far)", n, batches, total)
			}
			if err := o.s.tokens.CommitImport(ctx, b, r.Audit); err != nil {
				return err
			}
			for _, serial := range b.Serials() {
				if u := owners[serial]; u != nil {
					res.Owners[serial] = *u
				}
			}
			res.Imported = total
		}
		if res.Imported == 0 {
			r.Entry.Info = "imported 0 migrated tokens"
		}
		return nil
	})
	return res, err
}

// migratedRealms checks m's realms and owner and completes the owner's
// login from its resolver. It returns why m cannot be imported ("" when
// it can); an error is a user store's failure.
func (o *Ops) migratedRealms(ctx context.Context, m *token.Migrated) (string, error) {
	for _, rl := range m.Realms {
		if !o.s.realms.Exists(ctx, rl) {
			return "the token realm " + rl + " does not exist", nil
		}
	}
	if m.Owner == nil {
		return "", nil
	}
	u := *m.Owner
	rl, _, err := o.s.realms.Get(ctx, u.Realm)
	if errors.Is(err, realm.ErrNotFound) {
		return "the owner's realm " + u.Realm + " does not exist", nil
	}
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(rl.Resolvers, func(e realm.Entry) bool { return e.Name == u.Resolver }) {
		return "the resolver " + u.Resolver + " is not in the owner's realm " + rl.Name, nil
	}
	in, err := o.s.resolvers.Instance(ctx, u.Resolver)
	if err != nil {
		return "", fmt.Errorf("resolver %s: %w", u.Resolver, err)
	}
	info, err := in.User(ctx, u.UID)
	if errors.Is(err, resolver.ErrNoUser) {
		return ReasonOwnerUnknown + " (user id " + u.UID + " in resolver " + u.Resolver + ")", nil
	}
	if err != nil {
		return "", fmt.Errorf("resolver %s, user id %s: %w", u.Resolver, u.UID, err)
	}
	login := info.String(resolver.KeyUsername)
	if login == "" {
		return "the owner (user id " + u.UID + " in resolver " + u.Resolver + ") has no login name", nil
	}
	if u.Login != "" && u.Login != login {
		return "the owner's login does not match user id " + u.UID + " in resolver " + u.Resolver, nil
	}
	u.Login, u.Realm = login, rl.Name
	m.Owner = &u
	return "", nil
}
