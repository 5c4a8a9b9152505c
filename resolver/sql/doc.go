// Package sql is the "sqlresolver" user store: users are rows of one table
// in SQLite (modernc.org/sqlite), PostgreSQL (pgx through database/sql) or
// MySQL/MariaDB (go-sql-driver/mysql), configured the way privacyIDEA's
// SQL resolver is (Driver, Server, ..., Table, Map, Where).
//
// Nothing from the configuration is pasted into SQL as text except
// identifiers, and those are checked against ^[A-Za-z_][A-Za-z0-9_]*$ at
// save time and quoted for the dialect. Every value (logins, search text,
// Where values, uids) is a bound parameter; LIKE patterns escape % and _
// with an explicit ESCAPE so that * is the only wildcard. Stored password
// hashes are verified in the formats privacyIDEA accepts (phpass, Drupal,
// LDAP digests, the crypt family, OTRS hex SHA-256); see verifyPassword.
//
// The database password is never part of a connection string: it is handed
// to the driver's config struct, and errors are censored before they leave
// the package.
//
// PostgreSQL and MySQL connections (TCP and Unix sockets) go through the
// dial policy of resolver.Env (Env.Dial), set as the drivers' dial
// function; SQLite opens a local file and dials nothing.
//
// Package sql sits on floor 2: it imports resolver, apierr and netguard,
// never server or root.
package sql
