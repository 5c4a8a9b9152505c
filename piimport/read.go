package piimport

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrWrongKey means a value of the database does not decrypt with the
// encKey given: it is not this installation's key. Read returns it
// (wrapped, naming the object) before anything is written.
var ErrWrongKey = errors.New("wrong encKey")

// ErrUnsupportedVersion means the database's alembic revision is not one
// of SupportedVersions.
var ErrUnsupportedVersion = errors.New("unsupported privacyIDEA version")

// ErrNotPrivacyIDEA means the database lacks privacyIDEA's tables.
var ErrNotPrivacyIDEA = errors.New("not a privacyIDEA database")

// Bounds on what Read takes from a database: it is input, and everything
// is held in memory.
const (
	maxTokens = 5_000_000  // rows of the token table
	maxRows   = 50_000_000 // rows of any other table
	maxText   = 1 << 20    // bytes of a TEXT value (tokeninfo, options, attributes, descriptions)
)

// hexKeyTypes are the token types whose key_enc holds a hex seed.
var hexKeyTypes = map[string]bool{
	"hotp": true, "totp": true, "motp": true, "spass": true, "paper": true,
	"tan": true, "email": true, "sms": true, "yubikey": true,
	"daypassword": true, "ocra": true, "tiqr": true,
}

// textKeyTypes are the token types whose key_enc holds a text (password,
// registration code, secret).
var textKeyTypes = map[string]bool{"pw": true, "registration": true, "indexedsecret": true}

// unreadReasons says, for each privacyIDEA table the import does not
// bring over, why (%d is the number of rows).
var unreadReasons = map[string]string{
	"pidea_audit":          "%d rows of privacyIDEA's audit log are not brought over; authsrv starts its own signed audit chain (keep the privacyIDEA database to consult the old log)",
	"clientapplication":    "%d rows: the clients privacyIDEA saw are runtime information; authsrv records the clients it sees itself",
	"nodename":             "%d rows: the node names of the privacyIDEA installation belong to it",
	"challenge":            "%d open challenges are not brought over: they expire within minutes; users ask for a new one",
	"usercache":            "%d rows of privacyIDEA's user cache are not brought over; authsrv reads the user stores itself",
	"authcache":            "%d rows of privacyIDEA's authentication cache are not brought over; users authenticate afresh",
	"eventcounter":         "%d counters kept by privacyIDEA's Counter event handler are statistics of the old installation and are not brought over",
	"monitoringstats":      "%d rows of privacyIDEA's monitoring statistics are not brought over",
	"periodictask":         "%d periodic tasks are not imported; set up their equivalent in authsrv",
	"periodictaskoption":   "%d options of periodic tasks are not imported (the tasks are not)",
	"periodictasklastrun":  "%d last-run times of periodic tasks are not imported (the tasks are not)",
	"subscription":         "%d privacyIDEA subscriptions are licences of privacyIDEA, not configuration",
	"tokengroup":           "%d token groups are not imported",
	"tokentokengroup":      "%d token group memberships are not imported (the groups are not); the tokens are",
	"tokencontainer":       "%d token containers are not imported; the tokens in them are imported on their own",
	"tokencontainerinfo":   "%d rows of token container information are not imported (the containers are not)",
	"tokencontainerowner":  "%d token container owners are not imported (the containers are not); the tokens keep their owners",
	"tokencontainerrealm":  "%d token container realms are not imported (the containers are not)",
	"tokencontainerstates": "%d token container states are not imported (the containers are not)",
	"tokencontainertoken":  "%d token container memberships are not imported (the containers are not); the tokens are",
	"privacyideaserver":    "%d remote privacyIDEA server definitions are not imported",
	"passwordreset":        "%d pending password reset codes are not brought over; users ask for new ones",
}

// readTables are the tables Read brings into the Snapshot.
var readTables = map[string]bool{
	"alembic_version": true, "token": true, "tokeninfo": true, "tokenowner": true,
	"tokenrealm": true, "resolver": true, "resolverconfig": true, "realm": true,
	"resolverrealm": true, "policy": true, "policycondition": true, "description": true,
	"config": true, "smtpserver": true, "smsgateway": true, "smsgatewayoption": true,
	"radiusserver": true, "machineresolver": true, "machineresolverconfig": true,
	"machinetoken": true, "machinetokenoptions": true, "serviceid": true,
	"caconnector": true, "caconnectorconfig": true, "customuserattribute": true,
	"eventhandler": true, "eventhandlercondition": true, "eventhandleroption": true,
	"admin": true,
}

// Read checks that db is a privacyIDEA database of a supported release
// and reads everything the import brings over into a Snapshot, decrypting
// every encrypted value with keys. A value that does not decrypt means the
// encKey is not this installation's: Read returns ErrWrongKey (wrapped,
// naming the object). Read only reads, inside one transaction, so that a
// privacyIDEA still running gives a consistent picture.
func Read(ctx context.Context, db *DB, keys *Keys) (*Snapshot, error) {
	if keys == nil {
		return nil, errors.New("no encKey")
	}
	var opts *sql.TxOptions
	if db.dialect != dialectSQLite {
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	tx, err := db.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", db, err)
	}
	defer func() { _ = tx.Rollback() }()
	r := &reader{db: db, tx: tx, keys: keys, snap: &Snapshot{}}
	if err := r.read(ctx); err != nil {
		return nil, err
	}
	return r.snap, nil
}

// reader holds the state of one Read.
type reader struct {
	db     *DB
	tx     *sql.Tx
	keys   *Keys
	snap   *Snapshot
	tables map[string]string // lower-case name -> name as the database has it

	tokens map[int64]int // token.id -> index in snap.Tokens
	realms map[int64]string
}

func (r *reader) read(ctx context.Context) error {
	if err := r.checkVersion(ctx); err != nil {
		return err
	}
	steps := []func(context.Context) error{
		r.readTokens, r.readResolvers, r.readRealms, r.readPolicies, r.readConfig,
		r.readSMTP, r.readSMS, r.readRadius, r.readMachineResolvers, r.readMachineTokens,
		r.readServiceIDs, r.readCAConnectors, r.readAttributes, r.readEvents, r.readAdmins,
		r.readUnread,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// listTables fills r.tables.
func (r *reader) listTables(ctx context.Context) error {
	var q string
	switch r.db.dialect {
	case dialectSQLite:
		q = `SELECT name FROM sqlite_master WHERE type = 'table'`
	case dialectMySQL:
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'`
	default:
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	r.tables = map[string]string{}
	name := textCol(255)
	return r.each(ctx, "the list of tables", maxRows, q, []any{name}, func() error {
		r.tables[strings.ToLower(name.s)] = name.s
		return nil
	})
}

// checkVersion checks that this is a privacyIDEA database at a supported
// alembic revision.
func (r *reader) checkVersion(ctx context.Context) error {
	if err := r.listTables(ctx); err != nil {
		return fmt.Errorf("%s: %w", r.db, err)
	}
	for _, t := range []string{"alembic_version", "token", "config"} {
		if _, ok := r.tables[t]; !ok {
			return fmt.Errorf("%s is %w: it has no %s table", r.db, ErrNotPrivacyIDEA, t)
		}
	}
	var revs []string
	v := textCol(32 * 4)
	if err := r.each(ctx, "alembic_version", 100, `SELECT "version_num" FROM "alembic_version"`, []any{v}, func() error {
		revs = append(revs, v.s)
		return nil
	}); err != nil {
		return err
	}
	if len(revs) == 1 {
		if ver, ok := SupportedVersions[revs[0]]; ok {
			r.snap.Revision, r.snap.Version = revs[0], ver
			return nil
		}
	}
	found := "no alembic revision (the alembic_version table is empty)"
	if len(revs) > 0 {
		found = "alembic revision " + strings.Join(revs, ", ")
	}
	return fmt.Errorf("%w: the database is at %s; this import reads %s: bring privacyIDEA to a supported release first",
		ErrUnsupportedVersion, found, supportedList())
}

// supportedList names the supported releases: "privacyIDEA 3.10.2
// (alembic eac770c0bbed)".
func supportedList() string {
	var l []string
	for _, rev := range slices.Sorted(maps.Keys(SupportedVersions)) {
		l = append(l, fmt.Sprintf("privacyIDEA %s (alembic %s)", SupportedVersions[rev], rev))
	}
	return strings.Join(l, ", ")
}

// each runs the query q (with "double-quoted" identifiers) and calls fn
// after scanning every row into dest. It stops with an error after limit
// rows.
func (r *reader) each(ctx context.Context, table string, limit int, q string, dest []any, fn func() error) error {
	rows, err := r.tx.QueryContext(ctx, r.db.sql(q))
	if err != nil {
		return fmt.Errorf("reading %s: %w", table, err)
	}
	defer func() { _ = rows.Close() }()
	n := 0
	for rows.Next() {
		n++
		if n > limit {
			return fmt.Errorf("reading %s: more than %d rows, more than this import takes", table, limit)
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("reading %s: %w", table, err)
		}
		if err := fn(); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", table, err)
	}
	return nil
}

func wrongKey(what string) error {
	return fmt.Errorf("%w: the encKey does not decrypt %s: is it this installation's enckey file?", ErrWrongKey, what)
}

// password decrypts a "password" value; what names it for the error.
func (r *reader) password(v, what string) (Secret, error) {
	if v == "" {
		return nil, nil
	}
	b, err := r.keys.decryptPassword(v)
	if err != nil {
		return nil, wrongKey(what)
	}
	return Secret(b), nil
}

// configValue decrypts v when typ is "password".
func (r *reader) configValue(v, typ, what string) (string, error) {
	if typ != "password" {
		return v, nil
	}
	b, err := r.password(v, what)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", wrongKey(what)
	}
	return string(b), nil
}

func (r *reader) readTokens(ctx context.Context) error {
	var (
		id                                        = intCol()
		desc, serial, typ                         = textCol(80 * 4), textCol(40 * 4), textCol(30 * 4)
		userPIN, userPINIV, pinSeed               = textCol(512 * 4), textCol(32 * 4), textCol(32 * 4)
		otpLen                                    = intCol()
		pinHash, keyEnc, keyIV                    = textCol(512 * 4), textCol(2800 * 4), textCol(32 * 4)
		maxFail                                   = intCol()
		active, revoked, locked                   = boolCol(), boolCol(), boolCol()
		failCount, count, countWindow, syncWindow = intCol(), intCol(), intCol(), intCol()
		rolloutState                              = textCol(10 * 4)
	)
	r.tokens = map[int64]int{}
	q := `SELECT "id", "description", "serial", "tokentype", "user_pin", "user_pin_iv", "pin_seed", "otplen",
		"pin_hash", "key_enc", "key_iv", "maxfail", "active", "revoked", "locked", "failcount", "count",
		"count_window", "sync_window", "rollout_state" FROM "token" ORDER BY "id"`
	err := r.each(ctx, "token", maxTokens, q, []any{id, desc, serial, typ, userPIN, userPINIV, pinSeed, otpLen,
		pinHash, keyEnc, keyIV, maxFail, active, revoked, locked, failCount, count, countWindow, syncWindow, rolloutState},
		func() error {
			t := Token{
				ID: id.n, Serial: serial.s, Type: strings.ToLower(typ.s), Description: desc.s,
				OTPLen: int(otpLen.n), PINHash: pinHash.s, PINSeed: pinSeed.s,
				MaxFail: int(maxFail.n), FailCount: int(failCount.n),
				CountWindow: int(countWindow.n), SyncWindow: int(syncWindow.n),
				Active: active.b, Revoked: revoked.b, Locked: locked.b, RolloutState: rolloutState.s,
			}
			if count.n < 0 {
				return fmt.Errorf("token %s: the counter is negative", t.Serial)
			}
			t.Count = uint64(count.n)
			if keyEnc.s != "" {
				k, err := r.keys.decryptHex(keyToken, keyIV.s, keyEnc.s)
				if err != nil || !keyFits(t.Type, k) {
					return wrongKey(fmt.Sprintf("token %s's seed", t.Serial))
				}
				t.Key = Secret(k)
			}
			if userPIN.s != "" {
				p, err := r.keys.decryptHex(keyToken, userPINIV.s, userPIN.s)
				if err != nil || !utf8.Valid(p) {
					return wrongKey(fmt.Sprintf("token %s's user PIN", t.Serial))
				}
				t.UserPIN = Secret(p)
			}
			if _, dup := r.tokens[t.ID]; dup {
				return fmt.Errorf("token table: id %d twice", t.ID)
			}
			r.tokens[t.ID] = len(r.snap.Tokens)
			r.snap.Tokens = append(r.snap.Tokens, t)
			return nil
		})
	if err != nil {
		return err
	}
	if err := r.readRealmNames(ctx); err != nil {
		return err
	}

	tokenID, key, value, vtype, vdesc := intCol(), textCol(255*4), textCol(maxText), textCol(100*4), textCol(2000*4)
	err = r.each(ctx, "tokeninfo", maxRows,
		`SELECT "token_id", "Key", "Value", "Type", "Description" FROM "tokeninfo" ORDER BY "token_id", "id"`,
		[]any{tokenID, key, value, vtype, vdesc}, func() error {
			t := r.token(tokenID)
			if t == nil {
				return nil // privacyIDEA deletes tokeninfo with its token; a stray row belongs to nothing
			}
			info := TokenInfo{Key: key.s, Value: value.s, Type: vtype.s, Description: vdesc.s}
			if vtype.s == "password" {
				p, err := r.password(value.s, fmt.Sprintf("token %s's tokeninfo %q", t.Serial, key.s))
				if err != nil {
					return err
				}
				if !utf8.Valid(p) {
					return wrongKey(fmt.Sprintf("token %s's tokeninfo %q", t.Serial, key.s))
				}
				info.Value, info.Secret = string(p), true
			}
			t.Info = append(t.Info, info)
			return nil
		})
	if err != nil {
		return err
	}

	resolver, userID, realmID := textCol(120*4), textCol(320*4), intCol()
	err = r.each(ctx, "tokenowner", maxRows,
		`SELECT "token_id", "resolver", "user_id", "realm_id" FROM "tokenowner" ORDER BY "id"`,
		[]any{tokenID, resolver, userID, realmID}, func() error {
			if t := r.token(tokenID); t != nil {
				t.Owners = append(t.Owners, Owner{Resolver: resolver.s, UserID: userID.s, Realm: r.realmName(realmID)})
			}
			return nil
		})
	if err != nil {
		return err
	}
	return r.each(ctx, "tokenrealm", maxRows,
		`SELECT "token_id", "realm_id" FROM "tokenrealm" ORDER BY "id"`,
		[]any{tokenID, realmID}, func() error {
			if t := r.token(tokenID); t != nil && !realmID.null {
				if name, ok := r.realms[realmID.n]; ok {
					t.Realms = append(t.Realms, name)
				}
			}
			return nil
		})
}

// keyFits reports whether a decrypted key_enc is what the token type
// keeps there: a wrong encKey that happens to give valid padding is
// caught here.
func keyFits(typ string, k []byte) bool {
	switch {
	case hexKeyTypes[typ]:
		return len(k)%2 == 0 && isHex(string(k))
	case textKeyTypes[typ]:
		return utf8.Valid(k)
	}
	return true
}

func (r *reader) token(id *nint) *Token {
	if id.null {
		return nil
	}
	i, ok := r.tokens[id.n]
	if !ok {
		return nil
	}
	return &r.snap.Tokens[i]
}

// readRealmNames maps realm ids to names for the tables that refer to
// realms by id.
func (r *reader) readRealmNames(ctx context.Context) error {
	r.realms = map[int64]string{}
	id, name := intCol(), textCol(255*4)
	return r.each(ctx, "realm", maxRows, `SELECT "id", "name" FROM "realm"`, []any{id, name}, func() error {
		r.realms[id.n] = name.s
		return nil
	})
}

func (r *reader) realmName(id *nint) string {
	if id.null {
		return ""
	}
	return r.realms[id.n]
}

// readKV reads one of privacyIDEA's key/value config tables (resolverconfig,
// machineresolverconfig, caconnectorconfig) into maps by parent id.
func (r *reader) readKV(ctx context.Context, table, parentCol, kind string, names map[int64]string) (map[int64]map[string]ConfigValue, error) {
	out := map[int64]map[string]ConfigValue{}
	parent, key, value, vtype, vdesc := intCol(), textCol(255*4), textCol(2000*4), textCol(2000*4), textCol(2000*4)
	q := fmt.Sprintf(`SELECT "%s", "Key", "Value", "Type", "Description" FROM "%s" ORDER BY "id"`, parentCol, table)
	err := r.each(ctx, table, maxRows, q, []any{parent, key, value, vtype, vdesc}, func() error {
		name, ok := names[parent.n]
		if parent.null || !ok {
			return nil
		}
		v, err := r.configValue(value.s, vtype.s, fmt.Sprintf("%s %s's %s", kind, name, key.s))
		if err != nil {
			return err
		}
		if out[parent.n] == nil {
			out[parent.n] = map[string]ConfigValue{}
		}
		out[parent.n][key.s] = ConfigValue{Value: v, Type: vtype.s, Description: vdesc.s}
		return nil
	})
	return out, err
}

// readNamed reads (id, name, type) from a definition table.
func (r *reader) readNamed(ctx context.Context, table, typeCol string) ([]int64, map[int64]string, map[int64]string, error) {
	var ids []int64
	names, types := map[int64]string{}, map[int64]string{}
	id, name, typ := intCol(), textCol(255*4), textCol(255*4)
	q := fmt.Sprintf(`SELECT "id", "name", "%s" FROM "%s" ORDER BY "id"`, typeCol, table)
	err := r.each(ctx, table, maxRows, q, []any{id, name, typ}, func() error {
		ids = append(ids, id.n)
		names[id.n], types[id.n] = name.s, typ.s
		return nil
	})
	return ids, names, types, err
}

func (r *reader) readResolvers(ctx context.Context) error {
	ids, names, types, err := r.readNamed(ctx, "resolver", "rtype")
	if err != nil {
		return err
	}
	cfg, err := r.readKV(ctx, "resolverconfig", "resolver_id", "resolver", names)
	if err != nil {
		return err
	}
	for _, id := range ids {
		r.snap.Resolvers = append(r.snap.Resolvers, Resolver{Name: names[id], Type: types[id], Config: orEmpty(cfg[id])})
	}
	return nil
}

func orEmpty(m map[string]ConfigValue) map[string]ConfigValue {
	if m == nil {
		return map[string]ConfigValue{}
	}
	return m
}

func (r *reader) readRealms(ctx context.Context) error {
	id, name, def, option := intCol(), textCol(255*4), boolCol(), textCol(40*4)
	index := map[int64]int{}
	err := r.each(ctx, "realm", maxRows, `SELECT "id", "name", "default", "option" FROM "realm" ORDER BY "id"`,
		[]any{id, name, def, option}, func() error {
			index[id.n] = len(r.snap.Realms)
			r.snap.Realms = append(r.snap.Realms, Realm{Name: name.s, Default: def.b, Option: option.s})
			return nil
		})
	if err != nil {
		return err
	}
	realmID, resolver, prio, node := intCol(), textCol(255*4), intCol(), textCol(36*4)
	return r.each(ctx, "resolverrealm", maxRows,
		`SELECT rr."realm_id", r."name", rr."priority", rr."node_uuid" FROM "resolverrealm" rr
		 JOIN "resolver" r ON r."id" = rr."resolver_id" ORDER BY rr."id"`,
		[]any{realmID, resolver, prio, node}, func() error {
			i, ok := index[realmID.n]
			if realmID.null || !ok {
				return nil
			}
			r.snap.Realms[i].Resolvers = append(r.snap.Realms[i].Resolvers, RealmResolver{
				Resolver: resolver.s, Priority: int(prio.n), HasPriority: !prio.null, Node: node.s,
			})
			return nil
		})
}

func (r *reader) readPolicies(ctx context.Context) error {
	var (
		id                                    = intCol()
		active, checkAll, caseInsens          = boolCol(), boolCol(), boolCol()
		name, scope, action                   = textCol(64 * 4), textCol(32 * 4), textCol(2000 * 4)
		realm, adminRealm, adminUser, resolvr = textCol(256 * 4), textCol(256 * 4), textCol(256 * 4), textCol(256 * 4)
		pinode, user, client, tm              = textCol(256 * 4), textCol(256 * 4), textCol(256 * 4), textCol(64 * 4)
		prio                                  = intCol()
	)
	index := map[int64]int{}
	err := r.each(ctx, "policy", maxRows,
		`SELECT "id", "active", "check_all_resolvers", "name", "user_case_insensitive", "scope", "action", "realm",
		 "adminrealm", "adminuser", "resolver", "pinode", "user", "client", "time", "priority" FROM "policy" ORDER BY "id"`,
		[]any{id, active, checkAll, name, caseInsens, scope, action, realm, adminRealm, adminUser, resolvr, pinode, user, client, tm, prio},
		func() error {
			index[id.n] = len(r.snap.Policies)
			r.snap.Policies = append(r.snap.Policies, Policy{
				Name: name.s, Scope: scope.s, Action: action.s, Realm: realm.s, AdminRealm: adminRealm.s,
				AdminUser: adminUser.s, Resolver: resolvr.s, PINode: pinode.s, User: user.s, Client: client.s,
				Time: tm.s, Active: active.b, CheckAllResolvers: checkAll.b, UserCaseInsens: caseInsens.b,
				Priority: int(prio.n),
			})
			return nil
		})
	if err != nil {
		return err
	}
	policyID, section, key, comparator, value, cactive := intCol(), textCol(255*4), textCol(255*4), textCol(255*4), textCol(2000*4), boolCol()
	err = r.each(ctx, "policycondition", maxRows,
		`SELECT "policy_id", "section", "Key", "comparator", "Value", "active" FROM "policycondition" ORDER BY "id"`,
		[]any{policyID, section, key, comparator, value, cactive}, func() error {
			if i, ok := index[policyID.n]; ok && !policyID.null {
				r.snap.Policies[i].Conditions = append(r.snap.Policies[i].Conditions, PolicyCondition{
					Section: section.s, Key: key.s, Comparator: comparator.s, Value: value.s, Active: cactive.b,
				})
			}
			return nil
		})
	if err != nil {
		return err
	}
	objectID, desc := intCol(), textCol(maxText)
	return r.each(ctx, "description", maxRows,
		`SELECT "object_id", "description" FROM "description" WHERE "object_type" = 'policy' ORDER BY "id"`,
		[]any{objectID, desc}, func() error {
			if i, ok := index[objectID.n]; ok {
				r.snap.Policies[i].Description = desc.s
			}
			return nil
		})
}

func (r *reader) readConfig(ctx context.Context) error {
	key, value, vtype, vdesc := textCol(255*4), textCol(2000*4), textCol(2000*4), textCol(2000*4)
	err := r.each(ctx, "config", maxRows, `SELECT "Key", "Value", "Type", "Description" FROM "config"`,
		[]any{key, value, vtype, vdesc}, func() error {
			if key.s == "__timestamp__" {
				return nil
			}
			v, err := r.configValue(value.s, vtype.s, fmt.Sprintf("setting %s", key.s))
			if err != nil {
				return err
			}
			r.snap.Config = append(r.snap.Config, ConfigEntry{Key: key.s, Value: v, Type: vtype.s, Description: vdesc.s})
			return nil
		})
	// Sorted here, not by the database: collations differ.
	slices.SortFunc(r.snap.Config, func(a, b ConfigEntry) int { return strings.Compare(a.Key, b.Key) })
	return err
}

func (r *reader) readSMTP(ctx context.Context) error {
	ident, server, port, user, pw, sender := textCol(255*4), textCol(255*4), intCol(), textCol(255*4), textCol(255*4), textCol(255*4)
	tls, desc, timeout, enqueue := boolCol(), textCol(2000*4), intCol(), boolCol()
	return r.each(ctx, "smtpserver", maxRows,
		`SELECT "identifier", "server", "port", "username", "password", "sender", "tls", "description", "timeout", "enqueue_job"
		 FROM "smtpserver" ORDER BY "id"`,
		[]any{ident, server, port, user, pw, sender, tls, desc, timeout, enqueue}, func() error {
			p, err := r.password(pw.s, fmt.Sprintf("SMTP server %s's password", ident.s))
			if err != nil {
				return err
			}
			r.snap.SMTPServers = append(r.snap.SMTPServers, SMTPServer{
				Identifier: ident.s, Server: server.s, Port: int(port.n), Username: user.s, Password: p,
				Sender: sender.s, TLS: tls.b, Description: desc.s, Timeout: int(timeout.n), EnqueueJob: enqueue.b,
			})
			return nil
		})
}

func (r *reader) readSMS(ctx context.Context) error {
	id, ident, desc, module := intCol(), textCol(255*4), textCol(1024*4), textCol(1024*4)
	index := map[int64]int{}
	err := r.each(ctx, "smsgateway", maxRows,
		`SELECT "id", "identifier", "description", "providermodule" FROM "smsgateway" ORDER BY "id"`,
		[]any{id, ident, desc, module}, func() error {
			index[id.n] = len(r.snap.SMSGateways)
			r.snap.SMSGateways = append(r.snap.SMSGateways, SMSGateway{Identifier: ident.s, Description: desc.s, ProviderModule: module.s})
			return nil
		})
	if err != nil {
		return err
	}
	gw, key, value, vtype := intCol(), textCol(255*4), textCol(maxText), textCol(100*4)
	return r.each(ctx, "smsgatewayoption", maxRows,
		`SELECT "gateway_id", "Key", "Value", "Type" FROM "smsgatewayoption" ORDER BY "id"`,
		[]any{gw, key, value, vtype}, func() error {
			if i, ok := index[gw.n]; ok && !gw.null {
				r.snap.SMSGateways[i].Options = append(r.snap.SMSGateways[i].Options, SMSOption{Key: key.s, Value: value.s, Type: vtype.s})
			}
			return nil
		})
}

func (r *reader) readRadius(ctx context.Context) error {
	ident, server, port, secret, dict, desc, timeout, retries := textCol(255*4), textCol(255*4), intCol(), textCol(255*4), textCol(255*4), textCol(2000*4), intCol(), intCol()
	return r.each(ctx, "radiusserver", maxRows,
		`SELECT "identifier", "server", "port", "secret", "dictionary", "description", "timeout", "retries"
		 FROM "radiusserver" ORDER BY "id"`,
		[]any{ident, server, port, secret, dict, desc, timeout, retries}, func() error {
			s, err := r.password(secret.s, fmt.Sprintf("RADIUS server %s's secret", ident.s))
			if err != nil {
				return err
			}
			r.snap.RadiusServers = append(r.snap.RadiusServers, RadiusServer{
				Identifier: ident.s, Server: server.s, Port: int(port.n), Secret: s, Dictionary: dict.s,
				Description: desc.s, Timeout: int(timeout.n), Retries: int(retries.n),
			})
			return nil
		})
}

func (r *reader) readMachineResolvers(ctx context.Context) error {
	ids, names, types, err := r.readNamed(ctx, "machineresolver", "rtype")
	if err != nil {
		return err
	}
	cfg, err := r.readKV(ctx, "machineresolverconfig", "resolver_id", "machine resolver", names)
	if err != nil {
		return err
	}
	for _, id := range ids {
		r.snap.MachineResolvers = append(r.snap.MachineResolvers, MachineResolver{Name: names[id], Type: types[id], Config: orEmpty(cfg[id])})
	}
	return nil
}

func (r *reader) readMachineTokens(ctx context.Context) error {
	id, tokenID, serial, mrID, mr, machineID, app := intCol(), intCol(), textCol(40*4), intCol(), textCol(255*4), textCol(255*4), textCol(64*4)
	index := map[int64]int{}
	err := r.each(ctx, "machinetoken", maxRows,
		`SELECT mt."id", mt."token_id", t."serial", mt."machineresolver_id", mr."name", mt."machine_id", mt."application"
		 FROM "machinetoken" mt
		 LEFT JOIN "token" t ON t."id" = mt."token_id"
		 LEFT JOIN "machineresolver" mr ON mr."id" = mt."machineresolver_id"
		 ORDER BY mt."id"`,
		[]any{id, tokenID, serial, mrID, mr, machineID, app}, func() error {
			name := "machinetoken " + strconv.FormatInt(id.n, 10)
			switch {
			case serial.null:
				r.snap.Unread = append(r.snap.Unread, Row{Kind: "machinetoken", Name: name,
					Reason: fmt.Sprintf("attaches token id %d, which does not exist", tokenID.n)})
				return nil
			case !mrID.null && mr.null:
				r.snap.Unread = append(r.snap.Unread, Row{Kind: "machinetoken", Name: name,
					Reason: fmt.Sprintf("attaches token %s to machine resolver id %d, which does not exist", serial.s, mrID.n)})
				return nil
			}
			index[id.n] = len(r.snap.MachineTokens)
			r.snap.MachineTokens = append(r.snap.MachineTokens, MachineToken{
				Serial: serial.s, MachineResolver: mr.s, MachineID: machineID.s, Application: app.s,
				Options: map[string]string{},
			})
			return nil
		})
	if err != nil {
		return err
	}
	mtID, key, value := intCol(), textCol(64*4), textCol(64*4)
	return r.each(ctx, "machinetokenoptions", maxRows,
		`SELECT "machinetoken_id", "mt_key", "mt_value" FROM "machinetokenoptions" ORDER BY "id"`,
		[]any{mtID, key, value}, func() error {
			if i, ok := index[mtID.n]; ok && !mtID.null {
				r.snap.MachineTokens[i].Options[key.s] = value.s
			}
			return nil
		})
}

func (r *reader) readServiceIDs(ctx context.Context) error {
	name, desc := textCol(255*4), textCol(2000*4)
	return r.each(ctx, "serviceid", maxRows, `SELECT "name", "Description" FROM "serviceid" ORDER BY "id"`,
		[]any{name, desc}, func() error {
			r.snap.ServiceIDs = append(r.snap.ServiceIDs, ServiceID{Name: name.s, Description: desc.s})
			return nil
		})
}

func (r *reader) readCAConnectors(ctx context.Context) error {
	ids, names, types, err := r.readNamed(ctx, "caconnector", "catype")
	if err != nil {
		return err
	}
	cfg, err := r.readKV(ctx, "caconnectorconfig", "caconnector_id", "CA connector", names)
	if err != nil {
		return err
	}
	for _, id := range ids {
		r.snap.CAConnectors = append(r.snap.CAConnectors, CAConnector{Name: names[id], Type: types[id], Config: orEmpty(cfg[id])})
	}
	return nil
}

func (r *reader) readAttributes(ctx context.Context) error {
	userID, resolver, realmID, key, value, vtype := textCol(320*4), textCol(120*4), intCol(), textCol(255*4), textCol(maxText), textCol(100*4)
	return r.each(ctx, "customuserattribute", maxRows,
		`SELECT "user_id", "resolver", "realm_id", "Key", "Value", "Type" FROM "customuserattribute" ORDER BY "id"`,
		[]any{userID, resolver, realmID, key, value, vtype}, func() error {
			r.snap.Attributes = append(r.snap.Attributes, UserAttribute{
				UserID: userID.s, Resolver: resolver.s, Realm: r.realmName(realmID), Key: key.s, Value: value.s, Type: vtype.s,
			})
			return nil
		})
}

func (r *reader) readEvents(ctx context.Context) error {
	id, name, active, ordering, position := intCol(), textCol(64*4), boolCol(), intCol(), textCol(10*4)
	event, module, action := textCol(255*4), textCol(255*4), textCol(1024*4)
	index := map[int64]int{}
	err := r.each(ctx, "eventhandler", maxRows,
		`SELECT "id", "name", "active", "ordering", "position", "event", "handlermodule", "action"
		 FROM "eventhandler" ORDER BY "id"`,
		[]any{id, name, active, ordering, position, event, module, action}, func() error {
			index[id.n] = len(r.snap.Events)
			r.snap.Events = append(r.snap.Events, EventHandler{
				ID: id.n, Name: name.s, Active: active.b, Ordering: int(ordering.n), Position: position.s,
				Event: event.s, HandlerModule: module.s, Action: action.s,
			})
			return nil
		})
	if err != nil {
		return err
	}
	ehID, key, value, comparator := intCol(), textCol(255*4), textCol(2000*4), textCol(255*4)
	err = r.each(ctx, "eventhandlercondition", maxRows,
		`SELECT "eventhandler_id", "Key", "Value", "comparator" FROM "eventhandlercondition" ORDER BY "id"`,
		[]any{ehID, key, value, comparator}, func() error {
			if i, ok := index[ehID.n]; ok && !ehID.null {
				r.snap.Events[i].Conditions = append(r.snap.Events[i].Conditions, EventCondition{Key: key.s, Value: value.s, Comparator: comparator.s})
			}
			return nil
		})
	if err != nil {
		return err
	}
	vtype, vdesc := textCol(2000*4), textCol(2000*4)
	return r.each(ctx, "eventhandleroption", maxRows,
		`SELECT "eventhandler_id", "Key", "Value", "Type", "Description" FROM "eventhandleroption" ORDER BY "id"`,
		[]any{ehID, key, value, vtype, vdesc}, func() error {
			if i, ok := index[ehID.n]; ok && !ehID.null {
				r.snap.Events[i].Options = append(r.snap.Events[i].Options, EventOption{Key: key.s, Value: value.s, Type: vtype.s, Description: vdesc.s})
			}
			return nil
		})
}

func (r *reader) readAdmins(ctx context.Context) error {
	name, pw, email := textCol(120*4), textCol(255*4), textCol(255*4)
	return r.each(ctx, "admin", maxRows, `SELECT "username", "password", "email" FROM "admin" ORDER BY "username"`,
		[]any{name, pw, email}, func() error {
			r.snap.Admins = append(r.snap.Admins, Admin{Username: name.s, PasswordHash: pw.s, Email: email.s})
			return nil
		})
}

// readUnread lists the other tables that hold rows, with the reason they
// are not brought over.
func (r *reader) readUnread(ctx context.Context) error {
	for _, lower := range slices.Sorted(maps.Keys(r.tables)) {
		if readTables[lower] || strings.HasPrefix(lower, "sqlite_") {
			continue
		}
		name := r.tables[lower]
		n := intCol()
		if err := r.each(ctx, name, 1, `SELECT COUNT(*) FROM `+r.db.quote(name), []any{n}, func() error { return nil }); err != nil {
			return err
		}
		if n.n == 0 {
			continue
		}
		reason, ok := unreadReasons[lower]
		if !ok {
			reason = "%d rows: the table is not part of privacyIDEA " + r.snap.Version + "'s schema as this import knows it, and is not read"
		}
		r.snap.Unread = append(r.snap.Unread, Row{Kind: "table", Name: name, Reason: fmt.Sprintf(reason, n.n)})
	}
	return nil
}

// nstr scans a text column: NULL becomes "", and a value longer than max
// bytes is an error (the database is input).
type nstr struct {
	s    string
	null bool
	max  int
}

func textCol(max int) *nstr { return &nstr{max: max} }

func (v *nstr) Scan(src any) error {
	v.s, v.null = "", false
	switch x := src.(type) {
	case nil:
		v.null = true
	case string:
		v.s = x
	case []byte:
		v.s = string(x)
	case int64:
		v.s = strconv.FormatInt(x, 10)
	case float64:
		v.s = strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		v.s = strconv.FormatBool(x)
	case time.Time:
		v.s = x.Format(time.RFC3339Nano)
	default:
		return fmt.Errorf("unexpected %T for a text column", src)
	}
	if len(v.s) > v.max {
		return fmt.Errorf("a value of %d bytes, more than the %d the column takes", len(v.s), v.max)
	}
	return nil
}

// nint scans an integer column: NULL becomes 0.
type nint struct {
	n    int64
	null bool
}

func intCol() *nint { return &nint{} }

func (v *nint) Scan(src any) error {
	v.n, v.null = 0, false
	switch x := src.(type) {
	case nil:
		v.null = true
	case int64:
		v.n = x
	case int32:
		v.n = int64(x)
	case float64:
		if x != float64(int64(x)) {
			return fmt.Errorf("%v is not an integer", x)
		}
		v.n = int64(x)
	case bool:
		if x {
			v.n = 1
		}
	case []byte:
		return v.parse(string(x))
	case string:
		return v.parse(x)
	default:
		return fmt.Errorf("unexpected %T for an integer column", src)
	}
	return nil
}

func (v *nint) parse(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		v.null = true
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("a value that is not an integer")
	}
	v.n = n
	return nil
}

// nbool scans a BOOLEAN column: an integer in SQLite and MySQL, a bool in
// PostgreSQL; NULL is false.
type nbool struct {
	b bool
}

func boolCol() *nbool { return &nbool{} }

func (v *nbool) Scan(src any) error {
	v.b = false
	switch x := src.(type) {
	case nil:
	case bool:
		v.b = x
	case int64:
		v.b = x != 0
	case []byte:
		return v.parse(string(x))
	case string:
		return v.parse(x)
	default:
		return fmt.Errorf("unexpected %T for a boolean column", src)
	}
	return nil
}

func (v *nbool) parse(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "y", "yes", "on":
		v.b = true
	case "", "0", "f", "false", "n", "no", "off":
	default:
		return errors.New("a value that is not a boolean")
	}
	return nil
}
